#!/usr/bin/env python3
"""What an idle HTTP/2 connection without streams costs a server (docs/PERFORMANCE.md, Table 4).

Opens N TCP connections to ADDR and, with --h2, starts HTTP/2 on each (the client preface and
an empty SETTINGS frame, then reads the server's SETTINGS), keeps them open, and prints the
growth of the server's VmRSS (from /proc/PID/status) per connection. No streams are opened, so
what it measures is the server's per-connection state: the TCP socket, the connection task,
and the HTTP/2 codec, its buffers and its HPACK tables.

    python3 tests/bench/idle_connections.py --addr 127.0.0.1:18000 --pid "$(pidof xdst)" --n 5000 --h2

Needs N + 100 open files (the soft limit is raised to the hard one).
"""

import argparse
import resource
import socket
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", required=True, help="the server's HOST:PORT")
    p.add_argument("--pid", type=int, required=True, help="the server's process id")
    p.add_argument("--n", type=int, default=5000, help="connections (default 5000)")
    p.add_argument("--h2", action="store_true", help="start HTTP/2 on each connection")
    p.add_argument("--settle", type=float, default=3.0, help="seconds to wait before reading RSS")
    args = p.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < args.n + 100:
        sys.exit(f"open-files hard limit {hard} is below {args.n + 100}: raise it (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, args.n + 100), hard))

    host, port = args.addr.rsplit(":", 1)
    before = rss_kb(args.pid)
    conns = []
    for _ in range(args.n):
        s = socket.create_connection((host, int(port)))
        if args.h2:
            s.sendall(PREFACE + EMPTY_SETTINGS)
        conns.append(s)
    time.sleep(args.settle)
    if args.h2:
        # Read what the server sent (its SETTINGS, a WINDOW_UPDATE), as a client would.
        for s in conns:
            s.setblocking(False)
            try:
                while s.recv(65536):
                    pass
            except BlockingIOError:
                pass
        time.sleep(1)
    after = rss_kb(args.pid)
    kind = "HTTP/2" if args.h2 else "TCP"
    per = (after - before) * 1024 / args.n / 1000
    print(f"{args.n} idle {kind} connections: server RSS {before} -> {after} KiB, {per:.1f} KB per connection")


if __name__ == "__main__":
    main()
