#!/usr/bin/env python3
"""CSDS client for xdst integration tests: the generated stubs of the `xds-protos` package.

    python csds_client.py --server 127.0.0.1:PORT [--node-prefix envoy-] [--stream [--repeat N]]
                          [--token T] [--max-receive-mb M] [--sizes]

Asks the server's envoy.service.status.v3.ClientStatusDiscoveryService once (FetchClientStatus,
or with --stream --repeat N requests and as many responses on StreamClientStatus; the last is
printed) and prints one JSON line:

    {"ok": true, "nodes": [{"id": "...", "cluster": "...", "scope": "...", "resources": [
        {"type": "...Listener", "name": "...", "version": "...", "client_status": "ACKED",
         "config_status": "SYNCED", "has_config": true, "error": "", "failed_version": ""}]}],
     "error": "", "bytes": 1234}

`bytes` is the size of the (last) response as encoded (its ByteSize). --max-receive-mb raises
grpcio's limit on a response's size (4 MiB by default); a larger one is a RESOURCE_EXHAUSTED
error. With --sizes it prints sizes instead of the nodes: {"ok": true, "bytes": N, "nodes": 20,
"resources": 20000, "nacked": 20000, "max_error_bytes": 4096, "error": ""}. On an RPC error: {"ok": false, "code": "PERMISSION_DENIED", "error": "..."}, exit status 1.
"""

import argparse
import json
import sys

import grpc
from envoy.admin.v3 import config_dump_shared_pb2
from envoy.service.status.v3 import csds_pb2, csds_pb2_grpc
from envoy.type.matcher.v3 import node_pb2, string_pb2


def summary(response):
    nodes = []
    for config in response.config:
        resources = []
        for g in config.generic_xds_configs:
            resources.append({
                "type": g.type_url,
                "name": g.name,
                "version": g.version_info,
                "client_status": config_dump_shared_pb2.ClientResourceStatus.Name(g.client_status),
                "config_status": csds_pb2.ConfigStatus.Name(g.config_status),
                "has_config": g.HasField("xds_config"),
                "error": g.error_state.details,
                "failed_version": g.error_state.version_info,
            })
        nodes.append({
            "id": config.node.id,
            "cluster": config.node.cluster,
            "scope": config.client_scope,
            "resources": resources,
        })
    return nodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--node-prefix", default="")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--token", default="")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=1, help="with --stream: requests sent at once")
    ap.add_argument("--max-receive-mb", type=int, default=4, help="the largest response accepted")
    ap.add_argument("--sizes", action="store_true", help="print sizes and counts, not the nodes")
    args = ap.parse_args()

    request = csds_pb2.ClientStatusRequest()
    if args.node_prefix:
        request.node_matchers.append(
            node_pb2.NodeMatcher(node_id=string_pb2.StringMatcher(prefix=args.node_prefix)))
    metadata = [("authorization", "Bearer " + args.token)] if args.token else []
    options = [("grpc.max_receive_message_length", args.max_receive_mb << 20)]
    with grpc.insecure_channel(args.server, options=options) as channel:
        stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(channel)
        try:
            if args.stream:
                responses = stub.StreamClientStatus(
                    iter([request] * args.repeat), timeout=args.timeout, metadata=metadata)
                for _ in range(args.repeat):
                    response = next(responses)
            else:
                response = stub.FetchClientStatus(request, timeout=args.timeout, metadata=metadata)
        except grpc.RpcError as e:
            print(json.dumps({"ok": False, "code": e.code().name, "error": e.details()}))
            return 1
    if args.sizes:
        generic = [g for c in response.config for g in c.generic_xds_configs]
        print(json.dumps({
            "ok": True, "bytes": response.ByteSize(), "nodes": len(response.config), "resources": len(generic),
            "nacked": sum(1 for g in generic if g.client_status == config_dump_shared_pb2.NACKED),
            "max_error_bytes": max((len(g.error_state.details.encode()) for g in generic), default=0),
            "error": "",
        }))
        return 0
    print(json.dumps({"ok": True, "nodes": summary(response), "error": "", "bytes": response.ByteSize()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
