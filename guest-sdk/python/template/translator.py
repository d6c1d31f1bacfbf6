"""{{name}}: translates `{{kind}}` intent documents into Envoy clusters.

    kind: {{kind}}
    metadata: {name: web}
    spec: {address: 10.0.0.1, port: 8080}

becomes one STATIC Cluster `web` with that endpoint. Plain Python, no bindings: it runs
natively too (tests/), and app.py hands it what xdst sends.
"""

from __future__ import annotations

import ipaddress
from typing import Any

KIND = "{{kind}}"


class Invalid(Exception):
    """Bad intent: `field` of the document (`spec.port`) and what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def cluster(name: str, document: dict[str, Any]) -> dict[str, Any]:
    """The Cluster for one document, as Envoy's canonical proto3 JSON."""
    spec = document.get("spec") or {}
    if not isinstance(spec, dict):
        raise Invalid("spec", "must be a map")
    address = spec.get("address")
    if address is None:
        raise Invalid("spec.address", "missing: the endpoint's IP address")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise Invalid("spec.address", f"{address!r} is not an IP address") from None
    port = spec.get("port")
    if port is None:
        raise Invalid("spec.port", "missing: the endpoint's port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise Invalid("spec.port", f"{port!r} is not a port number from 1 to 65535")
    endpoint = {"address": {"socket_address": {"address": address, "port_value": port}}}
    return {
        "name": name,
        "type": "STATIC",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": endpoint}]}]},
    }
