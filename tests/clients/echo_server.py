#!/usr/bin/env python3
"""Echo backend for xdst integration tests.

A grpcio server with no .proto files: one generic handler serves the unary method
/xdst.test.Echo/Say with raw bytes in and out. The reply is b"NAME:" + request, so a
client can tell which backend answered.

    python echo_server.py --port 0 --name a    # prints "ready <port>" once serving

Binds 127.0.0.1 only. --port 0 picks a free port; the chosen one is in the "ready" line.
Exits cleanly (status 0) on SIGTERM or SIGINT.
"""

import argparse
import signal
import sys
from concurrent import futures

import grpc

SERVICE = "xdst.test.Echo"
METHOD = "Say"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1 (0 = any free port)")
    parser.add_argument("--name", required=True, help="backend name, prefixed to every reply")
    args = parser.parse_args()

    prefix = args.name.encode() + b":"

    def say(request: bytes, context: grpc.ServicerContext) -> bytes:
        return prefix + request

    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            # No serializers: grpcio hands the handler the raw request bytes and sends
            # the returned bytes as they are.
            METHOD: grpc.unary_unary_rpc_method_handler(
                say, request_deserializer=None, response_serializer=None
            ),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    if port == 0:
        print(f"error: cannot bind 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
        return 1
    server.start()

    def on_signal(signum, frame):
        server.stop(grace=0.5)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    print(f"ready {port}", flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
