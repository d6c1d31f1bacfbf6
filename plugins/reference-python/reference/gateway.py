"""`HttpGateway` -> a Listener (RDS over ADS) and its RouteConfiguration, both named after
the document (mirrors gateway.rs)."""

from __future__ import annotations

from typing import Any

from . import check, envoy
from .document import Document, Output, Resource
from .duration import to_proto_json as duration
from .routing import mutate, route_match, to_backends
from .schema import GatewaySpec, HttpRouteSpec, RetriesSpec
from .text import debug

DEFAULT_RETRY_ON = "5xx,connect-failure,reset"


def _ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def translate(doc: Document, out: Output) -> None:
    spec = doc.spec(GatewaySpec)
    address = "0.0.0.0" if spec.address is None else spec.address
    doc.check("spec.address", check.ip, address)
    if not spec.hosts:
        raise doc.error("spec.hosts", "list at least one host")

    domains: set[str] = set()
    names: set[str] = set()
    routes = envoy.route_configuration(doc.name)
    for h, host in enumerate(spec.hosts):
        at = f"spec.hosts[{h}]"
        hostnames = ["*"] if host.hostnames is None else host.hostnames
        if not hostnames:
            raise doc.error(
                f"{at}.hostnames",
                "list at least one hostname (or leave hostnames out to match any)",
            )
        for i, d in enumerate(hostnames):
            doc.check(f"{at}.hostnames[{i}]", check.domain, d)
            if _ascii_lower(d) in domains:
                raise doc.error(
                    f"{at}.hostnames[{i}]", f"{debug(d)} is listed more than once in this gateway"
                )
            domains.add(_ascii_lower(d))
        if host.name is not None:
            doc.check(f"{at}.name", check.name, host.name)
            name = host.name
        else:
            name = hostnames[0]
        if name in names:
            raise doc.error(f"{at}.name", f"another host is already named {debug(name)}")
        names.add(name)
        if not host.routes:
            raise doc.error(f"{at}.routes", "list at least one route")
        vhost = envoy.virtual_host(name, hostnames)
        mutate(doc, vhost, host.request_headers, True, f"{at}.requestHeaders")
        mutate(doc, vhost, host.response_headers, False, f"{at}.responseHeaders")
        for r, route in enumerate(host.routes):
            vhost["routes"].append(http_route(doc, route, f"{at}.routes[{r}]"))
        routes["virtual_hosts"].append(vhost)

    listener = envoy.http_listener(doc.name, address, spec.port)
    out.resources.append(Resource(envoy.LISTENER, doc.name, listener, doc.id))
    out.resources.append(Resource(envoy.ROUTE_CONFIGURATION, doc.name, routes, doc.id))


def http_route(doc: Document, spec: HttpRouteSpec, at: str) -> dict[str, Any]:
    route, is_regex = route_match(doc, spec.match_, at)
    if spec.name is not None:
        route["name"] = spec.name
    action: dict[str, Any] = {}
    if spec.backends is not None and spec.direct_response is not None:
        raise doc.error(f"{at}.directResponse", "set backends or directResponse, not both")
    if spec.backends is None and spec.direct_response is None:
        raise doc.error(
            f"{at}.backends", "missing: the services to send requests to (or a directResponse)"
        )
    if spec.backends is not None:
        to_backends(doc, action, spec.backends, f"{at}.backends")
        route["route"] = action
    else:
        direct = spec.direct_response
        assert direct is not None
        if not 200 <= direct.status <= 599:
            raise doc.error(
                f"{at}.directResponse.status", "must be an HTTP status between 200 and 599"
            )
        if (spec.timeout is not None or spec.idle_timeout is not None
                or spec.retries is not None or spec.rewrite is not None):
            raise doc.error(
                f"{at}.directResponse",
                "timeout, idleTimeout, retries and rewrite apply to backends, not to a directResponse",
            )
        route["direct_response"] = envoy.direct_response(direct.status, direct.body)
    if spec.timeout is not None:
        action["timeout"] = duration(spec.timeout)
    if spec.idle_timeout is not None:
        action["idle_timeout"] = duration(spec.idle_timeout)
    if spec.retries is not None:
        action["retry_policy"] = http_retries(doc, spec.retries, f"{at}.retries")
    if spec.rewrite is not None:
        if is_regex:
            raise doc.error(
                f"{at}.rewrite.pathPrefix", "needs a pathPrefix or path match, not a regex"
            )
        doc.check(f"{at}.rewrite.pathPrefix", check.path, spec.rewrite.path_prefix)
        action["prefix_rewrite"] = spec.rewrite.path_prefix
    mutate(doc, route, spec.request_headers, True, f"{at}.requestHeaders")
    mutate(doc, route, spec.response_headers, False, f"{at}.responseHeaders")
    return route


def http_retries(doc: Document, spec: RetriesSpec, at: str) -> dict[str, Any]:
    attempts = 1 if spec.attempts is None else spec.attempts
    if attempts == 0:
        raise doc.error(f"{at}.attempts", "must be at least 1 (leave retries out for none)")
    on = doc.check(
        f"{at}.on", check.retry_on,
        DEFAULT_RETRY_ON if spec.on is None else spec.on, check.HTTP_RETRY_ON,
    )
    for i, code in enumerate(spec.status_codes):
        if not 100 <= code <= 599:
            raise doc.error(f"{at}.statusCodes[{i}]", "must be an HTTP status between 100 and 599")
    if spec.status_codes and "retriable-status-codes" not in on.split(","):
        on += ",retriable-status-codes"
    policy: dict[str, Any] = {"retry_on": on, "num_retries": attempts}
    if spec.per_try_timeout is not None:
        doc.check(f"{at}.perTryTimeout", check.positive, spec.per_try_timeout)
        policy["per_try_timeout"] = duration(spec.per_try_timeout)
    if spec.status_codes:
        policy["retriable_status_codes"] = list(spec.status_codes)
    return policy
