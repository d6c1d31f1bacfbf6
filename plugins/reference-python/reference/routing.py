"""What HttpGateway routes need besides the route itself: matches, backends, header
mutation (mirrors routing.rs)."""

from __future__ import annotations

from typing import Any

from . import check, envoy
from .document import Document
from .schema import BackendSpec, HeaderMatchSpec, HeadersSpec, MatchSpec
from .text import debug

_U32_MAX = 0xFFFF_FFFF


def route_match(doc: Document, m: MatchSpec | None, at: str) -> tuple[dict[str, Any], bool]:
    """A route with its match: one of `pathPrefix`, `path` or `regex` (default:
    `pathPrefix: /`), and header matchers. `at` is the route's field path. Returns the route
    and whether it matched a regex."""
    m = m or MatchSpec()
    if sum(x is not None for x in (m.path_prefix, m.path, m.regex)) > 1:
        raise doc.error(f"{at}.match", "set one of pathPrefix, path or regex, not several")
    if m.path_prefix is not None:
        doc.check(f"{at}.match.pathPrefix", check.path, m.path_prefix)
        route, is_regex = envoy.route("prefix", m.path_prefix), False
    elif m.path is not None:
        doc.check(f"{at}.match.path", check.path, m.path)
        route, is_regex = envoy.route("path", m.path), False
    elif m.regex is not None:
        doc.check(f"{at}.match.regex", check.regex, m.regex)
        route, is_regex = envoy.route("safe_regex", m.regex), True
    else:
        route, is_regex = envoy.route("prefix", "/"), False
    for i, h in enumerate(m.headers):
        matcher = header_match(doc, h, f"{at}.match.headers[{i}]")
        route["match"].setdefault("headers", []).append(matcher)
    return route, is_regex


def header_match(doc: Document, h: HeaderMatchSpec, at: str) -> dict[str, Any]:
    doc.check(f"{at}.name", check.header_name, h.name, False)
    if sum(x is not None for x in (h.exact, h.prefix, h.regex, h.present)) != 1:
        raise doc.error(at, "set exactly one of exact, prefix, regex or present")
    invert = h.invert
    if h.exact is not None:
        doc.check(f"{at}.exact", check.header_value, h.exact)
        m = envoy.string_match(h.name, "exact", h.exact)
    elif h.prefix is not None:
        doc.check(f"{at}.prefix", check.header_value, h.prefix)
        m = envoy.string_match(h.name, "prefix", h.prefix)
    elif h.regex is not None:
        doc.check(f"{at}.regex", check.regex, h.regex)
        m = envoy.string_match(h.name, "safe_regex", h.regex)
    else:
        # `present: false` matches requests without the header.
        invert ^= h.present is False
        m = envoy.present_match(h.name)
    if invert:
        m["invert_match"] = True
    return m


def check_backends(doc: Document, backends: list[BackendSpec], at: str) -> None:
    """Not empty, valid service names listed once, weights at least 1. `at` is the list's path."""
    if not backends:
        raise doc.error(at, "list at least one backend service")
    total = 0
    seen: set[str] = set()
    for i, b in enumerate(backends):
        doc.check(f"{at}[{i}].service", check.name, b.service)
        if len(backends) > 1:
            if b.service in seen:
                raise doc.error(f"{at}[{i}].service", f"{debug(b.service)} is listed twice")
            seen.add(b.service)
        weight = 1 if b.weight is None else b.weight
        doc.check(f"{at}[{i}].weight", check.weight, weight)
        total += weight
    if total > _U32_MAX:
        raise doc.error(at, "the weights add up to more than 4294967295")


def to_backends(doc: Document, action: dict[str, Any], backends: list[BackendSpec], at: str) -> None:
    """Checks `backends` and points the route action at them: one backend is a plain
    cluster, several a weighted split."""
    check_backends(doc, backends, at)
    if len(backends) == 1:
        action["cluster"] = backends[0].service
    else:
        action["weighted_clusters"] = envoy.weighted_clusters(
            [(b.service, 1 if b.weight is None else b.weight) for b in backends]
        )


def mutate(doc: Document, target: dict[str, Any], spec: HeadersSpec | None, request: bool,
           at: str) -> None:
    """Applies `requestHeaders` (`request`) or `responseHeaders` to a route or virtual host:
    `set`, then `add` (each in name order), then `remove`. `at` is the block's path."""
    if spec is None:
        return
    for overwrite, key, headers in ((True, "set", spec.set), (False, "add", spec.add)):
        for name in sorted(headers):
            value = headers[name]
            doc.check(f"{at}.{key}", check.header_name, name, True)
            doc.check(f"{at}.{key}.{name}", check.header_value, value)
            envoy.add_header(target, request, name, value, overwrite)
    for i, name in enumerate(spec.remove):
        doc.check(f"{at}.remove[{i}]", check.header_name, name, True)
        envoy.remove_header(target, request, name)
