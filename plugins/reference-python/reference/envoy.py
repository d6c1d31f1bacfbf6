"""Envoy resources as canonical proto3 JSON (dicts ready for json.dumps), built the way the
Rust guest SDK's builders (guest-sdk/rust/src/build) build them.

The host re-encodes what a plugin returns, so fields at their proto3 default vanish either
way; what matters is presence: an empty message (`{}`) or a wrapper (`UInt32Value`, a plain
number here) is emitted exactly where the Rust builders set it.
"""

from __future__ import annotations

from typing import Any


JSON = dict[str, Any]

CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
LOAD_ASSIGNMENT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ROUTE_CONFIGURATION = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
_ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"


def ads() -> JSON:
    """Fetch over the client's ADS stream, which is how xdst serves everything."""
    return {"ads": {}, "resource_api_version": "V3"}


def socket_address(ip: str, port: int) -> JSON:
    return {"socket_address": {"address": ip, "port_value": port}}


def header_value(name: str, value: str, overwrite: bool) -> JSON:
    """One header to add: `overwrite` replaces any value it has, otherwise another is appended."""
    return {
        "header": {"key": name, "value": value},
        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD" if overwrite else "APPEND_IF_EXISTS_OR_ADD",
    }


# --- clusters and endpoints ------------------------------------------------------------


def eds_cluster(name: str) -> JSON:
    """A cluster whose endpoints come by EDS over ADS, in a ClusterLoadAssignment of its name."""
    return {"name": name, "type": "EDS", "eds_cluster_config": {"eds_config": ads()}}


def health_check(checker: str, config: JSON) -> JSON:
    """`checker` is `http_health_check` or `grpc_health_check`. Defaults: every 10 s, 1 s
    timeout, healthy after 1 success, unhealthy after 3 failures."""
    return {
        "timeout": "1s",
        "interval": "10s",
        "healthy_threshold": 1,
        "unhealthy_threshold": 3,
        checker: config,
    }


def load_assignment(cluster_name: str) -> JSON:
    return {"cluster_name": cluster_name, "endpoints": []}


def locality(region: str = "", zone: str = "", sub_zone: str = "", weight: int = 1,
             priority: int = 0) -> JSON:
    """Endpoints in one place. `locality` is set even when empty: proxyless gRPC clients
    refuse a locality group without one."""
    out: JSON = {
        "locality": {k: v for k, v in (("region", region), ("zone", zone), ("sub_zone", sub_zone)) if v},
        "load_balancing_weight": weight,
        "lb_endpoints": [],
    }
    if priority:
        out["priority"] = priority
    return out


def lb_endpoint(ip: str, port: int, weight: int | None = None) -> JSON:
    out: JSON = {"endpoint": {"address": socket_address(ip, port)}}
    if weight is not None:
        out["load_balancing_weight"] = weight
    return out


# --- listeners -------------------------------------------------------------------------


def http_listener(name: str, address: str, port: int) -> JSON:
    """One filter chain with an HttpConnectionManager that fetches the RouteConfiguration
    `name` by RDS over ADS, and the router filter."""
    hcm = {
        "@type": _HCM,
        "stat_prefix": name,
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": _ROUTER}}],
        "rds": {"config_source": ads(), "route_config_name": name},
    }
    return {
        "name": name,
        "address": socket_address(address, port),
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
        ],
    }


# --- routes ----------------------------------------------------------------------------


def route_configuration(name: str) -> JSON:
    return {"name": name, "virtual_hosts": []}


def virtual_host(name: str, domains: list[str]) -> JSON:
    return {"name": name, "domains": list(domains), "routes": []}


def route(path_specifier: str, value: str) -> JSON:
    """A route matching `prefix`, `path` or `safe_regex` (the RE2 engine, left unset)."""
    match: JSON = {"safe_regex": {"regex": value}} if path_specifier == "safe_regex" else {path_specifier: value}
    return {"match": match}


def string_match(name: str, pattern: str, value: str) -> JSON:
    """A header matcher by `exact`, `prefix` or `safe_regex`."""
    matcher = {"safe_regex": {"regex": value}} if pattern == "safe_regex" else {pattern: value}
    return {"name": name, "string_match": matcher}


def present_match(name: str) -> JSON:
    return {"name": name, "present_match": True}


def add_header(target: JSON, request: bool, name: str, value: str, overwrite: bool) -> None:
    """Header mutation for a route or a virtual host (their messages share these fields)."""
    key = "request_headers_to_add" if request else "response_headers_to_add"
    target.setdefault(key, []).append(header_value(name, value, overwrite))


def remove_header(target: JSON, request: bool, name: str) -> None:
    key = "request_headers_to_remove" if request else "response_headers_to_remove"
    target.setdefault(key, []).append(name)


def weighted_clusters(clusters: list[tuple[str, int]]) -> JSON:
    return {"clusters": [{"name": n, "weight": w} for n, w in clusters]}


def direct_response(status: int, body: str | None) -> JSON:
    out: JSON = {"status": status}
    if body is not None:
        out["body"] = {"inline_string": body}
    return out
