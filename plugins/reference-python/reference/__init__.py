"""The reference translator's `Service` and `HttpGateway` kinds, in Python.

A port of plugins/reference (Rust): the same schema, defaults, checks and output, which
tests/conformance checks resource by resource. Pure Python and the standard library, so
it runs natively too (tests/); app.py adapts it to the WIT world.

    from reference import Document, translate
    out = translate([Document("Service", "web", "web.yaml#1", '{"spec": {...}}')], "null")
    out.resources  # [Resource(type_url, name, body, document), ...]

Every input error raises PluginError naming the document (`Kind/name`) and the field
(`spec.hosts[0].routes[1].backends`).
"""

from __future__ import annotations

import json

from . import gateway, service
from .document import Diagnostic, Document, Output, PluginError, Resource
from .text import debug, unexpected

NAME = "reference-python"
VERSION = "0.1.0"
KINDS = ["Service", "HttpGateway"]

__all__ = ["NAME", "VERSION", "KINDS", "Diagnostic", "Document", "Output", "PluginError",
           "Resource", "translate"]


def translate(documents: list[Document], config: str) -> Output:
    """Translates each document on its own, in order, into resources."""
    check_config(config)
    out = Output()
    for doc in documents:
        if doc.kind == "Service":
            service.translate(doc, out)
        elif doc.kind == "HttpGateway":
            gateway.translate(doc, out)
        else:
            raise doc.error_here(
                f"the reference plugin does not translate kind {debug(doc.kind)} "
                f"(it translates {', '.join(KINDS)})"
            )
    return out


def check_config(config: str) -> None:
    """The plugin takes no configuration: `null` or `{}`."""
    config = config.strip()
    if config in ("", "null"):
        return
    try:
        value = json.loads(config)
    except ValueError as e:
        raise PluginError(f"plugin configuration: {e} (the reference plugin takes none)") from None
    if not isinstance(value, dict):
        problem = f"invalid type: {unexpected(value)}, expected struct Config"
    elif value:
        problem = f"unknown field `{next(iter(value))}`, there are no fields"
    else:
        return
    raise PluginError(f"plugin configuration: {problem} (the reference plugin takes none)")
