"""Intent documents, and the errors, warnings and resources that name them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from . import schema
from .check import CheckError


class PluginError(Exception):
    """A failure the plugin reports itself (bad intent), naming the document and field."""

    def __init__(self, message: str, document: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.document = document
        self.field = field


@dataclass
class Diagnostic:
    severity: str  # "info" or "warning"
    message: str
    document: str | None = None
    field: str | None = None


@dataclass
class Resource:
    type_url: str
    name: str
    body: dict[str, Any]
    """Envoy's canonical proto3 JSON."""
    document: str | None = None


@dataclass
class Output:
    resources: list[Resource] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


T = TypeVar("T")


@dataclass
class Document:
    kind: str
    name: str
    origin: str
    json: str

    @property
    def id(self) -> str:
        """`Kind/name`: how resources, errors and diagnostics name this document."""
        return f"{self.kind}/{self.name}"

    def spec(self, cls: type[T]) -> T:
        """The document's `spec` read into `cls` (absent or null reads as `{}`). Errors name
        the offending field (`spec.hosts[0].port`)."""
        try:
            value = json.loads(self.json)
        except ValueError as e:
            raise self.error_here(f"the document is not JSON: {e}") from None
        if not isinstance(value, dict):
            raise self.error_here("the document is not a map")
        spec = value.get("spec")
        try:
            return schema.decode(cls, {} if spec is None else spec, "spec")
        except schema.SchemaError as e:
            raise self.error(e.path, e.message) from None

    def error(self, field: str, message: str) -> PluginError:
        """An error about `field` of this document; the host shows it as
        `Kind/name field <field>: <message> (in <origin>)`."""
        return PluginError(message, self.id, field)

    def error_here(self, message: str) -> PluginError:
        return PluginError(message, self.id)

    def warning(self, field: str, message: str) -> Diagnostic:
        """A warning about `field`; the host shows diagnostics as they are, so the message
        ends with the document's origin."""
        if self.origin:
            message = f"{message} ({self.origin})"
        return Diagnostic("warning", message, self.id, field)

    def check(self, field: str | Callable[[], str], check: Callable[..., T], *args: Any) -> T:
        """Runs `check(*args)`; its complaint becomes an error at `field` (a string, or a
        function building one only on failure)."""
        try:
            return check(*args)
        except CheckError as e:
            raise self.error(field() if callable(field) else field, str(e)) from None
