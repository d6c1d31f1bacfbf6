#!/usr/bin/env python3
"""A raw ADS client for xdst integration tests: grpcio and the generated stubs of `xds-protos`.

    python ads_client.py --server 127.0.0.1:PORT --node-id n1 [--node-cluster C] [--clients N]
                         [--node-id-suffix] [--api sotw|delta] [--types cds,lds,eds,rds,sds]
                         [--names a,b] [--mode ack|never-ack|nack|ack-once] [--nack-message-bytes B]
                         [--nack-names a,b] [--ca FILE [--cert FILE --key FILE] [--authority NAME]]
                         [--duration SECONDS]

Opens N independent ADS streams, each on its own channel, all with the same node id and cluster
(with --node-id-suffix, client i is `<node-id>-i`). Each subscribes to the --types: CDS and LDS as
a wildcard (the legacy form Envoy uses: no names, SOTW-7 / DELTA-2); EDS and RDS by name, the
--names given, else the names learned from the clusters (EDS) and listeners (RDS) received;
SDS by the --names given (a client asking for a Secret by name, as one that knows it would).

Every response is answered as --mode says: `ack` accepts it (SOTW-3: version_info and nonce;
DELTA-1: the nonce), `never-ack` says nothing at all (a client that hangs), `nack` rejects it
with error_detail (version_info stays at the last accepted, i.e. empty), whose message is
--nack-message-bytes bytes of text, and `ack-once` accepts the first response of each type and
rejects every later one (a client that was configured once and then refuses every change).

--nack-names a,b makes every NACK message name these resources, the way Envoy names what it
refused (`Error adding/updating cluster(s) a: rejected by test client, b: ...`), as a hostile
client would to steer the blame; the message is padded to --nack-message-bytes when shorter.

--ca FILE speaks TLS to the server, trusting that CA; --cert FILE --key FILE present a client
certificate (mTLS: any identity the test gives it, another team's say); --authority NAME checks
the server's certificate for that name (default: the --server host).

It runs until stdin closes or --duration seconds pass, then cancels its streams and exits 0.
Each event is one JSON line on stdout, flushed as it happens, so a test can follow them (each
also has "t": seconds since the client started):

    {"event": "subscribe", "client": 0, "type": "...Cluster", "names": []}
    {"event": "response", "client": 0, "type": "...Cluster", "version": "v", "nonce": "1", "resources": 3}
        (with "errors": [{"name", "code", "message"}] when it carries per-resource errors)
    {"event": "ack", "client": 0, "type": "...Cluster", "version": "v", "nonce": "1"}
    {"event": "nack", "client": 0, "type": "...Cluster", "nonce": "1", "message_bytes": 4190000,
     "message": "the first 200 characters of it"}
    {"event": "error", "client": 0, "code": "UNAVAILABLE", "details": "..."}
    {"event": "ended", "client": 0}          (the server ended the stream with OK)
    {"event": "closed", "clients": N}        (last line: it is done)
"""

import argparse
import json
import queue
import sys
import threading
import time

import grpc
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2

PREFIX = "type.googleapis.com/envoy."
TYPES = {
    "cds": PREFIX + "config.cluster.v3.Cluster",
    "lds": PREFIX + "config.listener.v3.Listener",
    "eds": PREFIX + "config.endpoint.v3.ClusterLoadAssignment",
    "rds": PREFIX + "config.route.v3.RouteConfiguration",
    "sds": PREFIX + "extensions.transport_sockets.tls.v3.Secret",
}
BY_NAME = {"eds", "rds", "sds"}
# Learned names come from: EDS names from clusters, RDS names from listeners.
SOURCE = {"eds": "cds", "rds": "lds"}
INVALID_ARGUMENT = 3

_print_lock = threading.Lock()
START = time.monotonic()


def emit(**event):
    event["t"] = round(time.monotonic() - START, 3)
    line = json.dumps(event)
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def eds_names(resources):
    """The ClusterLoadAssignment names a cluster set waits for (EDS clusters only)."""
    names = set()
    for any_ in resources:
        c = cluster_pb2.Cluster()
        any_.Unpack(c)
        if c.type == cluster_pb2.Cluster.EDS:
            names.add(c.eds_cluster_config.service_name or c.name)
    return names


def rds_names(resources):
    """The route configurations a listener set names over RDS (filter chains and api_listener)."""
    names = set()

    def hcm(any_):
        if any_.type_url.endswith("HttpConnectionManager"):
            m = http_connection_manager_pb2.HttpConnectionManager()
            any_.Unpack(m)
            if m.HasField("rds"):
                names.add(m.rds.route_config_name)

    for any_ in resources:
        listener = listener_pb2.Listener()
        any_.Unpack(listener)
        chains = list(listener.filter_chains)
        if listener.HasField("default_filter_chain"):
            chains.append(listener.default_filter_chain)
        for chain in chains:
            for f in chain.filters:
                if f.HasField("typed_config"):
                    hcm(f.typed_config)
        if listener.HasField("api_listener"):
            hcm(listener.api_listener.api_listener)
    return names


class Client:
    """One ADS stream on its own channel, answering every response as the mode says."""

    def __init__(self, index, args, node_id):
        self.index = index
        self.args = args
        self.delta = args.api == "delta"
        self.node = base_pb2.Node(id=node_id, cluster=args.node_cluster,
                                  user_agent_name="xdst-tests-ads-client")
        self.requests = queue.Queue()
        self.sent_node = False
        self.call = None
        self.closing = False
        self.nack_message = nack_message(args)
        self.types = args.types
        # Per type: the names asked for (None: wildcard), the last accepted version (SotW).
        self.names = {t: (None if t not in BY_NAME else set(args.names)) for t in self.types}
        self.accepted = {t: "" for t in self.types}
        self.last_nonce = {t: "" for t in self.types}
        self.subscribed = set()
        # Per type: whether a response of it was accepted (ack-once: the first only).
        self.acked_once = set()

    def request(self, t, **fields):
        """Queues a request for type t; the node goes on the stream's first request only (SOTW-1)."""
        if not self.sent_node:
            fields["node"] = self.node
            self.sent_node = True
        if self.delta:
            self.requests.put(discovery_pb2.DeltaDiscoveryRequest(type_url=TYPES[t], **fields))
        else:
            names = sorted(self.names[t]) if self.names[t] is not None else []
            self.requests.put(discovery_pb2.DiscoveryRequest(type_url=TYPES[t], resource_names=names, **fields))

    def subscribe(self, t, names=None):
        """The first request for t, or (SotW) a new name list / (Delta) the names added and removed."""
        if t in BY_NAME:
            names = set(names if names is not None else self.names[t])
            if not names and t not in self.subscribed:
                return  # nothing to ask for yet: wait until a name is learned
            old = self.names[t] if t in self.subscribed else set()
            if t in self.subscribed and names == old:
                return
            self.names[t] = names
        emit(event="subscribe", client=self.index, type=TYPES[t],
             names=sorted(self.names[t]) if self.names[t] is not None else [])
        first = t not in self.subscribed
        self.subscribed.add(t)
        if self.delta:
            if t in BY_NAME:
                self.request(t, resource_names_subscribe=sorted(names - old),
                             resource_names_unsubscribe=sorted(old - names))
            elif first:
                self.request(t)  # legacy wildcard: no names (DELTA-2)
        else:
            # A changed name list carries the last accepted version and nonce (SOTW-6).
            self.request(t, version_info=self.accepted[t], response_nonce=self.last_nonce[t])

    def accepts(self, t):
        """Whether this response of type t is accepted, as --mode says (never-ack: None)."""
        mode = self.args.mode
        if mode == "never-ack":
            return None
        if mode == "ack-once":
            first = t not in self.acked_once
            self.acked_once.add(t)
            return first
        return mode == "ack"

    def answer(self, t, version, nonce, accept):
        if accept is None:
            return
        if accept:
            if self.delta:
                self.request(t, response_nonce=nonce)
            else:
                self.accepted[t] = version
                self.request(t, version_info=version, response_nonce=nonce)
            emit(event="ack", client=self.index, type=TYPES[t], version=version, nonce=nonce)
            return
        # NACK (SOTW-3): error_detail set, version_info left at the last accepted.
        detail = status_pb2.Status(code=INVALID_ARGUMENT, message=self.nack_message)
        if self.delta:
            self.request(t, response_nonce=nonce, error_detail=detail)
        else:
            self.request(t, version_info=self.accepted[t], response_nonce=nonce, error_detail=detail)
        emit(event="nack", client=self.index, type=TYPES[t], version=version, nonce=nonce,
             message_bytes=len(self.nack_message), message=self.nack_message[:200])

    def learn(self, t, resources, accepted):
        """A CDS or LDS response may name new EDS or RDS resources to ask for. A client that
        rejects what it gets holds none of it and asks for nothing more (ack-once learns from
        the responses it accepted); one that never answers asks once (its first request of a
        type carries no nonce, so it acknowledges nothing)."""
        if accepted is False or self.args.names:
            return
        for by_name, source in SOURCE.items():
            if self.args.mode == "never-ack" and by_name in self.subscribed:
                continue
            if source == t and by_name in self.types:
                learned = eds_names(resources) if by_name == "eds" else rds_names(resources)
                self.subscribe(by_name, learned)

    def requests_iter(self):
        while True:
            r = self.requests.get()
            if r is None:
                return
            yield r

    def run(self):
        # Its own connection, as a separate client has: grpcio channels to one address share
        # a connection unless told not to.
        options = [("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 256 << 20),
                   ("grpc.use_local_subchannel_pool", 1)]
        with channel_to(self.args, options) as channel:
            stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
            rpc = stub.DeltaAggregatedResources if self.delta else stub.StreamAggregatedResources
            self.call = rpc(self.requests_iter())
            if self.closing:
                self.call.cancel()
            by_url = {u: t for t, u in TYPES.items()}
            for t in self.types:
                self.subscribe(t)
            try:
                for response in self.call:
                    t = by_url.get(response.type_url)
                    if t is None:
                        continue
                    self.last_nonce[t] = response.nonce
                    version = response.system_version_info if self.delta else response.version_info
                    event = dict(event="response", client=self.index, type=response.type_url,
                                 version=version, nonce=response.nonce, resources=len(response.resources))
                    if self.delta:
                        event["removed"] = len(response.removed_resources)
                    if response.resource_errors:
                        # gRFC A88: per-resource errors, name, code and message.
                        event["errors"] = [dict(name=e.resource_name.name, code=e.error_detail.code,
                                                message=e.error_detail.message) for e in response.resource_errors]
                    emit(**event)
                    accept = self.accepts(t)
                    self.answer(t, version, response.nonce, accept)
                    self.learn(t, [r.resource for r in response.resources] if self.delta else response.resources,
                               accept)
                emit(event="ended", client=self.index)
            except grpc.RpcError as e:
                if not self.closing:
                    emit(event="error", client=self.index, code=e.code().name, details=e.details() or "")

    def close(self):
        self.closing = True
        self.requests.put(None)
        if self.call is not None:
            self.call.cancel()


def nack_message(args):
    """The NACK's error_detail message: --nack-message-bytes of text, or (--nack-names) Envoy's
    form naming each resource, padded to --nack-message-bytes."""
    def text(n):
        return (args.nack_text * (n // len(args.nack_text) + 1))[:max(n, 0)]

    if not args.nack_names:
        return text(args.nack_message_bytes)
    reason = args.nack_text.strip()
    named = "Error adding/updating resource(s) " + ", ".join(f"{n}: {reason}" for n in args.nack_names)
    padding = args.nack_message_bytes - len(named) - 1
    return named + (" " + text(padding) if padding > 0 else "")


def channel_to(args, options):
    """A channel to --server: plaintext, or TLS (--ca) presenting a client certificate (--cert,
    --key) and checking the server's for --authority."""
    if not args.ca:
        return grpc.insecure_channel(args.server, options=options)

    def read(path):
        with open(path, "rb") as f:
            return f.read()

    creds = grpc.ssl_channel_credentials(root_certificates=read(args.ca),
                                         private_key=read(args.key) if args.key else None,
                                         certificate_chain=read(args.cert) if args.cert else None)
    if args.authority:
        options = options + [("grpc.ssl_target_name_override", args.authority),
                             ("grpc.default_authority", args.authority)]
    return grpc.secure_channel(args.server, creds, options=options)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--node-id", required=True)
    ap.add_argument("--node-cluster", default="")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--node-id-suffix", action="store_true", help="client i is <node-id>-i")
    ap.add_argument("--api", choices=["sotw", "delta"], default="sotw")
    ap.add_argument("--types", default="cds")
    ap.add_argument("--names", default="", help="EDS/RDS names to ask for (default: learned)")
    ap.add_argument("--mode", choices=["ack", "never-ack", "nack", "ack-once"], default="ack")
    ap.add_argument("--nack-message-bytes", type=int, default=64)
    ap.add_argument("--nack-names", default="", help="resource names every NACK message names")
    ap.add_argument("--ca", default="", help="TLS: the CA that signed the server's certificate")
    ap.add_argument("--cert", default="", help="TLS: the client certificate to present (with --key)")
    ap.add_argument("--key", default="", help="TLS: the client certificate's key")
    ap.add_argument("--authority", default="", help="TLS: the name the server's certificate must carry")
    ap.add_argument("--nack-text", default="rejected by test client ", help=argparse.SUPPRESS)
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args()
    args.types = [t.strip() for t in args.types.split(",") if t.strip()]
    unknown = [t for t in args.types if t not in TYPES]
    if unknown:
        ap.error(f"unknown types {unknown}: choose from {sorted(TYPES)}")
    args.names = [n for n in args.names.split(",") if n]
    args.nack_names = [n for n in args.nack_names.split(",") if n]
    if (args.cert or args.key or args.authority) and not args.ca:
        ap.error("--cert, --key and --authority need --ca")
    if bool(args.cert) != bool(args.key):
        ap.error("--cert and --key go together")

    clients = [Client(i, args, f"{args.node_id}-{i}" if args.node_id_suffix else args.node_id)
               for i in range(args.clients)]
    threads = [threading.Thread(target=c.run, daemon=True) for c in clients]
    for th in threads:
        th.start()

    done = threading.Event()

    def stdin_closed():
        sys.stdin.read()
        done.set()

    threading.Thread(target=stdin_closed, daemon=True).start()
    done.wait(args.duration)
    for c in clients:
        c.close()
    for th in threads:
        th.join(5)
    emit(event="closed", clients=len(clients))
    return 0


if __name__ == "__main__":
    sys.exit(main())
