#!/usr/bin/env python3
"""Proxyless gRPC xDS client (grpcio) for xdst integration tests.

    GRPC_XDS_BOOTSTRAP_CONFIG='{...}' python xds_client.py --target xds:///echo --count 5

Makes --count unary calls of /xdst.test.Echo/Say with payload b"hello-<i>", each retried
until one overall deadline (--timeout seconds from start) passes, and prints one JSON line:

    {"ok": true, "replies": ["a:hello-0", ...], "error": ""}

With --fail-fast, each call is made once, not waiting for the channel to be ready (gRPC's
default): it fails as soon as the channel reports a failure, with the channel's error, such as
one an xDS server sent for a resource (gRFC A88).

Exit status 0 only when all calls succeeded. The xDS bootstrap comes from the environment
(GRPC_XDS_BOOTSTRAP, a file, or GRPC_XDS_BOOTSTRAP_CONFIG, inline JSON), set by the caller.
A target without the xds: scheme (e.g. 127.0.0.1:PORT) skips xDS entirely and needs no
bootstrap; that is only for checking a backend directly.
"""

import argparse
import json
import os
import sys
import time

import grpc

METHOD = "/xdst.test.Echo/Say"
RETRY_PAUSE = 0.2
# Each attempt gets its own timeout (1 s, then 2 s), within the overall deadline: a call
# queued while the channel has only an xDS error (server not up yet) can stay stuck after the
# config arrives (seen with grpcio 1.85), while a fresh call on the same channel goes through.
ATTEMPT_TIMEOUTS = (1.0, 2.0)


def describe(err: grpc.RpcError) -> str:
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else None
    name = code.name if code is not None else "UNKNOWN"
    return f"{name}: {details}" if details else name


def run(target: str, count: int, timeout: float, fail_fast: bool = False) -> dict:
    deadline = time.monotonic() + timeout
    replies = []
    if target.startswith("xds:") and not (
        os.environ.get("GRPC_XDS_BOOTSTRAP") or os.environ.get("GRPC_XDS_BOOTSTRAP_CONFIG")
    ):
        return {
            "ok": False,
            "replies": replies,
            "error": "neither GRPC_XDS_BOOTSTRAP nor GRPC_XDS_BOOTSTRAP_CONFIG is set",
        }
    with grpc.insecure_channel(target) as channel:
        state = {"last": None}
        channel.subscribe(lambda s: state.__setitem__("last", s), try_to_connect=False)
        # No serializers: bytes go out and come back as they are.
        say = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        for i in range(count):
            payload = f"hello-{i}".encode()
            attempts = 0
            last_error = ""
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return {
                        "ok": False,
                        "replies": replies,
                        "error": f"call {i} ({payload.decode()}): deadline of {timeout:g}s passed "
                        f"after {attempts} attempt(s); last error: {last_error or 'none'}; "
                        f"channel state: {state['last'].name if state['last'] else 'unknown'}",
                    }
                attempt_timeout = remaining if fail_fast else ATTEMPT_TIMEOUTS[min(attempts, len(ATTEMPT_TIMEOUTS) - 1)]
                attempts += 1
                try:
                    reply = say(payload, timeout=min(remaining, attempt_timeout), wait_for_ready=not fail_fast)
                except grpc.RpcError as err:
                    last_error = describe(err)
                    if fail_fast:
                        return {"ok": False, "replies": replies, "error": f"call {i} ({payload.decode()}): {last_error}"}
                    time.sleep(min(RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
                    continue
                replies.append(reply.decode("utf-8", errors="replace"))
                break
    return {"ok": True, "replies": replies, "error": ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="xds:///echo")
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=20.0, help="overall deadline, seconds")
    parser.add_argument("--fail-fast", action="store_true", help="one attempt per call, not waiting for ready")
    args = parser.parse_args()
    try:
        result = run(args.target, args.count, args.timeout, args.fail_fast)
    except Exception as err:  # report anything unexpected in the JSON line too
        result = {"ok": False, "replies": [], "error": f"{type(err).__name__}: {err}"}
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
