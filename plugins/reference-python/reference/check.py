"""Value checks the schema cannot express (mirrors check.rs). Each raises CheckError saying
what is wrong, for the caller to attach to a document and field."""

from __future__ import annotations

import ipaddress
import re
import unicodedata
import warnings

from .text import debug

# What Envoy's `retry_on` accepts for HTTP routes (gRPC conditions included).
HTTP_RETRY_ON = (
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
)

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")
_TOKEN_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~"
)


class CheckError(ValueError):
    pass


def name(value: str) -> None:
    """A reference to another document's name (a Service): the host's rules for metadata.name."""
    if not value:
        raise CheckError("must not be empty")
    if len(value.encode()) > 253:
        raise CheckError(f"{debug(value)} is longer than 253 characters")
    if not all(c in _NAME_CHARS for c in value):
        raise CheckError(f"{debug(value)} may contain only letters, digits, '-', '.' and '_'")


def ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Listener and EDS endpoint addresses are IP literals: Envoy does not resolve them."""
    try:
        if "%" in address:  # Python accepts IPv6 scope ids; Envoy (and Rust) do not.
            raise ValueError(address)
        return ipaddress.ip_address(address)
    except ValueError:
        raise CheckError(
            f"{debug(address)} is not an IP address (Envoy does not resolve names here)"
        ) from None


def weight(value: int) -> None:
    """A weight in a split or a locality: at least 1."""
    if value == 0:
        raise CheckError("must be at least 1 (remove the entry to send it nothing)")


def domain(value: str) -> None:
    """A virtual host domain: `example.com`, `example.com:8080`, `*`, or one wildcard at either
    end (`*.example.com`, `example.*`)."""
    if not value:
        raise CheckError("must not be empty")
    if any(c.isspace() or unicodedata.category(c) == "Cc" or c == "/" for c in value):
        raise CheckError(f"{debug(value)} is not a hostname")
    stars = value.count("*")
    if stars > 1 or (stars == 1 and not value.startswith("*") and not value.endswith("*")):
        raise CheckError(
            f"{debug(value)}: a wildcard must be the first or last character, once (*.example.com)"
        )


def header_name(value: str, mutation: bool) -> None:
    """A header name in a matcher (pseudo-headers such as `:method` allowed) or in a mutation
    (Envoy refuses to add or remove pseudo-headers and `host`)."""
    token = value[1:] if value.startswith(":") else value
    if not token or not all(c in _TOKEN_CHARS for c in token):
        raise CheckError(f"{debug(value)} is not a valid header name")
    if mutation and (value.startswith(":") or value.lower() == "host"):
        raise CheckError(
            f"{debug(value)} cannot be changed here (pseudo-headers and host are off limits)"
        )


def at_least_one(value: int) -> None:
    """A count that must be at least 1 (health check thresholds)."""
    if value == 0:
        raise CheckError("must be at least 1")


def header_value(value: str) -> None:
    if any(c in "\r\n\0" for c in value):
        raise CheckError("must not contain CR, LF or NUL")


def path(value: str) -> None:
    """A path prefix or exact path: starts with `/`."""
    if not value.startswith("/"):
        raise CheckError(f"{debug(value)} must start with '/'")


# RE2 syntax that Python's `re` lacks, rewritten to something of the same shape before
# compiling: named groups `(?<n>`, `\z`, Unicode classes `\pL`, `\p{Greek}`.
_RE2_ONLY = [
    (re.compile(r"\(\?<(?=[A-Za-z_])"), "(?P<"),
    (re.compile(r"\\z"), r"\\Z"),
    (re.compile(r"\\[pP](\{[^}]*\}|[A-Za-z])"), "."),
]
# What Python's `re` accepts and RE2 refuses: look-around and back-references.
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\(\?P=|\\[1-9]")


def regex(value: str) -> None:
    """RE2 syntax, checked with Python's `re` after setting aside where the two differ.
    (The Rust reference uses Rust's regex parser; the two agree on what common regexes
    mean, and neither accepts look-around or back-references.)"""
    if not value:
        raise CheckError("must not be empty")
    unescaped = re.sub(r"\\\\", "", value)
    found = _NOT_RE2.search(unescaped)
    if found:
        raise CheckError(
            f"invalid regex {debug(value)}: {found.group(0)!s} (look-around and "
            "back-references) is not supported by RE2"
        )
    candidate = value
    for pattern, replacement in _RE2_ONLY:
        candidate = pattern.sub(replacement, candidate)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            re.compile(candidate)
    except re.error as e:
        raise CheckError(f"invalid regex {debug(value)}: {e.msg}") from None


def retry_on(value: str, allowed: tuple[str, ...]) -> str:
    """Normalises a comma-separated `retry_on` list (trimmed, no empty items) and checks each
    condition against `allowed`."""
    out = []
    for condition in (c.strip() for c in value.split(",")):
        if condition not in allowed:
            raise CheckError(
                f"unknown retry condition {debug(condition)} (one of: {', '.join(allowed)})"
            )
        out.append(condition)
    return ",".join(out)


def positive(nanos: int) -> None:
    if nanos == 0:
        raise CheckError("must be longer than 0s")
