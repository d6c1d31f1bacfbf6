"""The intent schema: what `spec` holds for `Service` and `HttpGateway` (mirrors schema.rs).

Field names are camelCase (derived from the snake_case attribute names; a trailing `_`
is dropped: `match_` is `match`), in the order schema.rs declares them, which is the order
error messages list them in. Unknown fields are errors. An `Optional` field may be
absent or null; a field with another default may be absent but not null; a field without
a default is required. Checks a type cannot express (ranges, exclusive choices) are in
the translating modules.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, NewType, Optional

from . import duration
from .text import one_of, unexpected

U16 = NewType("U16", int)
U32 = NewType("U32", int)
Port = NewType("Port", int)
"""A TCP port, 1 to 65535."""
Dur = NewType("Dur", int)
"""A duration string in the intent, kept as nanoseconds."""


class Protocol(enum.Enum):
    HTTP1 = "http1"
    HTTP2 = "http2"
    GRPC = "grpc"


class LoadBalancing(enum.Enum):
    ROUND_ROBIN = "roundRobin"
    LEAST_REQUEST = "leastRequest"
    RANDOM = "random"
    RING_HASH = "ringHash"
    MAGLEV = "maglev"


# --- kind: Service ---------------------------------------------------------------------


@dataclass(kw_only=True)
class EndpointSpec:
    address: str
    port: Port
    weight: Optional[U32] = None


@dataclass(kw_only=True)
class LocalitySpec:
    region: str = ""
    zone: str = ""
    sub_zone: str = ""
    weight: Optional[U32] = None
    priority: U32 = U32(0)
    endpoints: list[EndpointSpec] = field(default_factory=list)


@dataclass(kw_only=True)
class GrpcHealthCheckSpec:
    service_name: str = ""


@dataclass(kw_only=True)
class HealthCheckSpec:
    path: Optional[str] = None
    host: Optional[str] = None
    grpc: Optional[GrpcHealthCheckSpec] = None
    interval: Optional[Dur] = None
    timeout: Optional[Dur] = None
    healthy_threshold: Optional[U32] = None
    unhealthy_threshold: Optional[U32] = None


@dataclass(kw_only=True)
class CircuitBreakersSpec:
    max_connections: Optional[U32] = None
    max_pending_requests: Optional[U32] = None
    max_requests: Optional[U32] = None
    max_retries: Optional[U32] = None


@dataclass(kw_only=True)
class ServiceSpec:
    protocol: Protocol = Protocol.HTTP1
    load_balancing: LoadBalancing = LoadBalancing.ROUND_ROBIN
    connect_timeout: Optional[Dur] = None
    endpoints: list[EndpointSpec] = field(default_factory=list)
    localities: list[LocalitySpec] = field(default_factory=list)
    health_check: Optional[HealthCheckSpec] = None
    circuit_breakers: Optional[CircuitBreakersSpec] = None


# --- kind: HttpGateway -----------------------------------------------------------------


@dataclass(kw_only=True)
class HeaderMatchSpec:
    name: str
    exact: Optional[str] = None
    prefix: Optional[str] = None
    regex: Optional[str] = None
    present: Optional[bool] = None
    invert: bool = False


@dataclass(kw_only=True)
class MatchSpec:
    path_prefix: Optional[str] = None
    path: Optional[str] = None
    regex: Optional[str] = None
    headers: list[HeaderMatchSpec] = field(default_factory=list)


@dataclass(kw_only=True)
class BackendSpec:
    service: str
    weight: Optional[U32] = None


@dataclass(kw_only=True)
class DirectResponseSpec:
    status: U16
    body: Optional[str] = None


@dataclass(kw_only=True)
class RetriesSpec:
    attempts: Optional[U32] = None
    on: Optional[str] = None
    per_try_timeout: Optional[Dur] = None
    status_codes: list[U16] = field(default_factory=list)


@dataclass(kw_only=True)
class HeadersSpec:
    set: dict[str, str] = field(default_factory=dict)
    """Replace the header's value (or add it)."""
    add: dict[str, str] = field(default_factory=dict)
    """Add a value, keeping any the header has."""
    remove: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class RewriteSpec:
    path_prefix: str


@dataclass(kw_only=True)
class HttpRouteSpec:
    name: Optional[str] = None
    match_: Optional[MatchSpec] = None
    backends: Optional[list[BackendSpec]] = None
    direct_response: Optional[DirectResponseSpec] = None
    timeout: Optional[Dur] = None
    idle_timeout: Optional[Dur] = None
    retries: Optional[RetriesSpec] = None
    request_headers: Optional[HeadersSpec] = None
    response_headers: Optional[HeadersSpec] = None
    rewrite: Optional[RewriteSpec] = None


@dataclass(kw_only=True)
class HostSpec:
    name: Optional[str] = None
    hostnames: Optional[list[str]] = None
    routes: list[HttpRouteSpec]
    request_headers: Optional[HeadersSpec] = None
    response_headers: Optional[HeadersSpec] = None


@dataclass(kw_only=True)
class GatewaySpec:
    address: Optional[str] = None
    port: Port
    hosts: list[HostSpec]


# --- decoding --------------------------------------------------------------------------


class SchemaError(ValueError):
    """A value that does not fit the schema, at `path` (`spec.hosts[0].port`)."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        # Steps from the value at fault up to where decoding started, innermost first,
        # added as the error passes through each struct, list and map.
        self.steps: list[str] = []


T = typing.TypeVar("T")
Decoder = Callable[[Any], Any]


def decode(cls: type[T], value: Any, path: str = "spec") -> T:
    """Reads a JSON value (as json.loads returns it) into the dataclass `cls`."""
    try:
        return _decoder(cls)(value)
    except SchemaError as e:
        e.path = path + "".join(reversed(e.steps))
        raise


def _json_name(attribute: str) -> str:
    head, *rest = attribute.rstrip("_").split("_")
    return head + "".join(part.capitalize() for part in rest)


_UINT_MAX = {U16: 0xFFFF, U32: 0xFFFF_FFFF}
_UINT_NAME = {U16: "u16", U32: "u32"}


def _expected(hint: Any) -> str:
    if hint is str:
        return "a string"
    if hint is bool:
        return "a boolean"
    if hint in _UINT_NAME:
        return _UINT_NAME[hint]
    if hint is Port:
        return "a port number from 1 to 65535"
    if hint is Dur:
        return "a duration string such as 250ms, 1s or 1m30s"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return one_of([v.value for v in hint])
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return f"struct {hint.__name__}"
    origin = typing.get_origin(hint)
    if origin is list:
        return "a sequence"
    if origin is dict:
        return "a map"
    return str(hint)


def _optional_of(hint: Any) -> Any:
    """`X` for `Optional[X]`, else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        rest = [a for a in args if a is not type(None)]
        if len(args) == 2 and len(rest) == 1:
            return rest[0]
    return None


def _invalid_type(value: Any, hint: Any) -> SchemaError:
    return SchemaError(f"invalid type: {unexpected(value)}, expected {_expected(hint)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@functools.cache
def _decoder(hint: Any) -> Decoder:
    """A function reading JSON values of type `hint`, made once per type."""
    inner = _optional_of(hint)
    if inner is not None:
        decode_inner = _decoder(inner)
        return lambda value: None if value is None else decode_inner(value)
    if hint is str or hint is bool:
        def scalar(value: Any) -> Any:
            if type(value) is not hint:
                raise _invalid_type(value, hint)
            return value
        return scalar
    if hint in _UINT_MAX or hint is Port:
        low, high = (1, 65535) if hint is Port else (0, _UINT_MAX[hint])

        def integer(value: Any) -> int:
            if not _is_int(value):
                raise _invalid_type(value, hint)
            if not low <= value <= high:
                raise SchemaError(f"invalid value: {unexpected(value)}, expected {_expected(hint)}")
            return value
        return integer
    if hint is Dur:
        def dur(value: Any) -> int:
            if not isinstance(value, str):
                raise _invalid_type(value, hint)
            try:
                return duration.parse(value)
            except duration.DurationError as e:
                raise SchemaError(str(e)) from None
        return dur
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        variants = {v.value: v for v in hint}

        def variant(value: Any) -> Any:
            if not isinstance(value, str):
                raise _invalid_type(value, hint)
            if value not in variants:
                raise SchemaError(f"unknown variant `{value}`, expected {_expected(hint)}")
            return variants[value]
        return variant
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _struct_decoder(hint)
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        decode_item = _decoder(item)

        def sequence(value: Any) -> list[Any]:
            if not isinstance(value, list):
                raise _invalid_type(value, hint)
            out = []
            for v in value:
                try:
                    out.append(decode_item(v))
                except SchemaError as e:
                    e.steps.append(f"[{len(out)}]")
                    raise
            return out
        return sequence
    if origin is dict:
        _, item = typing.get_args(hint)
        decode_value = _decoder(item)

        def mapping(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise _invalid_type(value, hint)
            out = {}
            for k, v in value.items():
                try:
                    out[k] = decode_value(v)
                except SchemaError as e:
                    e.steps.append(f".{k}")
                    raise
            return out
        return mapping
    raise TypeError(f"no decoder for {hint!r}")


def _struct_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    # JSON name -> (attribute, decoder), in declaration order; and what must be present.
    fields: dict[str, tuple[str, Decoder]] = {}
    required: list[tuple[str, str]] = []
    for f in dataclasses.fields(cls):
        key = _json_name(f.name)
        fields[key] = (f.name, _decoder(hints[f.name]))
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append((key, f.name))

    def struct(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _invalid_type(value, cls)
        found: dict[str, Any] = {}
        # Keys in the order written, as serde reads them: the first bad one is reported.
        for key, v in value.items():
            entry = fields.get(key)
            if entry is None:
                e = SchemaError(f"unknown field `{key}`, expected {one_of(list(fields))}")
                e.steps.append(f".{key}")
                raise e
            try:
                found[entry[0]] = entry[1](v)
            except SchemaError as e:
                e.steps.append(f".{key}")
                raise
        for key, attribute in required:
            if attribute not in found:
                raise SchemaError(f"missing field `{key}`")
        return cls(**found)
    return struct
