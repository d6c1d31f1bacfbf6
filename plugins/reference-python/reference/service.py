"""`Service` -> an EDS Cluster and its ClusterLoadAssignment, both named after the document
(mirrors service.rs)."""

from __future__ import annotations

from typing import Any

from . import check, envoy
from .document import Document, Output, Resource
from .duration import to_proto_json as duration
from .schema import (
    CircuitBreakersSpec,
    EndpointSpec,
    HealthCheckSpec,
    LoadBalancing,
    LocalitySpec,
    Protocol,
    ServiceSpec,
)

_LB_POLICY = {
    LoadBalancing.ROUND_ROBIN: "ROUND_ROBIN",
    LoadBalancing.LEAST_REQUEST: "LEAST_REQUEST",
    LoadBalancing.RANDOM: "RANDOM",
    LoadBalancing.RING_HASH: "RING_HASH",
    LoadBalancing.MAGLEV: "MAGLEV",
}


def translate(doc: Document, out: Output) -> None:
    spec = doc.spec(ServiceSpec)
    http2 = spec.protocol in (Protocol.HTTP2, Protocol.GRPC)

    cluster = envoy.eds_cluster(doc.name)
    cluster["lb_policy"] = _LB_POLICY[spec.load_balancing]
    if spec.connect_timeout is not None:
        doc.check("spec.connectTimeout", check.positive, spec.connect_timeout)
        cluster["connect_timeout"] = duration(spec.connect_timeout)
    if http2:
        # Envoy accepts this older field with a deprecation warning, as in the Rust SDK.
        cluster["http2_protocol_options"] = {}
    if spec.localities:
        # Locality weights mean the same to Envoy as to gRPC clients.
        cluster["common_lb_config"] = {"locality_weighted_lb_config": {}}
    if spec.health_check is not None:
        cluster["health_checks"] = [health_check(doc, spec.health_check, http2)]
    if spec.circuit_breakers is not None:
        cluster["circuit_breakers"] = circuit_breakers(spec.circuit_breakers)

    endpoints = load_assignment(doc, spec.endpoints, spec.localities, out)
    out.resources.append(Resource(envoy.CLUSTER, doc.name, cluster, doc.id))
    out.resources.append(Resource(envoy.LOAD_ASSIGNMENT, doc.name, endpoints, doc.id))


def load_assignment(doc: Document, endpoints: list[EndpointSpec],
                    localities: list[LocalitySpec], out: Output) -> dict[str, Any]:
    if endpoints and localities:
        raise doc.error(
            "spec.localities",
            "put endpoints either in spec.endpoints or in spec.localities, not both",
        )
    seen: set[tuple[Any, int]] = set()
    cla = envoy.load_assignment(doc.name)
    count = len(endpoints)
    if endpoints:
        # Endpoints without a locality: one unnamed locality, weight 1.
        unnamed = envoy.locality()
        for i, e in enumerate(endpoints):
            unnamed["lb_endpoints"].append(endpoint(doc, e, seen, f"spec.endpoints[{i}]"))
        cla["endpoints"].append(unnamed)

    priorities: set[int] = set()
    places: set[tuple[str, str, str]] = set()
    locality_priorities: list[int] = []
    for n, loc in enumerate(localities):
        at = f"spec.localities[{n}]"
        place = (loc.region, loc.zone, loc.sub_zone)
        if place in places:
            raise doc.error(at, "another locality has the same region, zone and subZone")
        places.add(place)
        weight = 1 if loc.weight is None else loc.weight
        doc.check(f"{at}.weight", check.weight, weight)
        priorities.add(loc.priority)
        locality_priorities.append(loc.priority)
        count += len(loc.endpoints)
        group = envoy.locality(loc.region, loc.zone, loc.sub_zone, weight, loc.priority)
        for i, e in enumerate(loc.endpoints):
            group["lb_endpoints"].append(endpoint(doc, e, seen, f"{at}.endpoints[{i}]"))
        cla["endpoints"].append(group)

    # Priorities must run 0, 1, 2, ... without gaps.
    for want, have in enumerate(sorted(priorities)):
        if want != have:
            n = next((i for i, p in enumerate(locality_priorities) if p > want), 0)
            raise doc.error(
                f"spec.localities[{n}].priority",
                f"priorities must run 0, 1, 2, ... without gaps, and no locality has priority {want}",
            )
    if count == 0:
        out.diagnostics.append(doc.warning(
            "spec.endpoints", "no endpoints: requests to this service fail until it has some"
        ))
    if not cla["endpoints"]:
        del cla["endpoints"]
    return cla


def endpoint(doc: Document, e: EndpointSpec, seen: set[tuple[Any, int]], at: str) -> dict[str, Any]:
    ip = doc.check(f"{at}.address", check.ip, e.address)
    if (ip, e.port) in seen:
        raise doc.error(at, f"{e.address}:{e.port} is listed twice")
    seen.add((ip, e.port))
    if e.weight is not None:
        doc.check(f"{at}.weight", check.weight, e.weight)
    return envoy.lb_endpoint(e.address, e.port, e.weight)


def health_check(doc: Document, spec: HealthCheckSpec, http2: bool) -> dict[str, Any]:
    at = "spec.healthCheck"
    if spec.path is not None and spec.grpc is None:
        doc.check(f"{at}.path", check.path, spec.path)
        http: dict[str, Any] = {"path": spec.path}
        if http2:
            http["codec_client_type"] = "HTTP2"
        if spec.host is not None:
            doc.check(f"{at}.host", check.domain, spec.host)
            http["host"] = spec.host
        hc = envoy.health_check("http_health_check", http)
    elif spec.path is None and spec.grpc is not None:
        if not http2:
            raise doc.error(f"{at}.grpc", "gRPC health checks need protocol http2 or grpc")
        if spec.host is not None:
            raise doc.error(f"{at}.host", "applies to HTTP checks (path) only")
        hc = envoy.health_check("grpc_health_check", {"service_name": spec.grpc.service_name})
    else:
        raise doc.error(
            at, "set path (an HTTP check) or grpc (the gRPC health checking protocol), one of them"
        )
    if spec.interval is not None:
        doc.check(f"{at}.interval", check.positive, spec.interval)
        hc["interval"] = duration(spec.interval)
    if spec.timeout is not None:
        doc.check(f"{at}.timeout", check.positive, spec.timeout)
        hc["timeout"] = duration(spec.timeout)
    if spec.healthy_threshold is not None:
        doc.check(f"{at}.healthyThreshold", check.at_least_one, spec.healthy_threshold)
        hc["healthy_threshold"] = spec.healthy_threshold
    if spec.unhealthy_threshold is not None:
        doc.check(f"{at}.unhealthyThreshold", check.at_least_one, spec.unhealthy_threshold)
        hc["unhealthy_threshold"] = spec.unhealthy_threshold
    return hc


def circuit_breakers(spec: CircuitBreakersSpec) -> dict[str, Any]:
    """Limits for the default priority; unset limits keep Envoy's defaults."""
    limits = {
        "max_connections": spec.max_connections,
        "max_pending_requests": spec.max_pending_requests,
        "max_requests": spec.max_requests,
        "max_retries": spec.max_retries,
    }
    thresholds: dict[str, Any] = {"priority": "DEFAULT"}
    thresholds.update((k, v) for k, v in limits.items() if v is not None)
    return {"thresholds": [thresholds]}
