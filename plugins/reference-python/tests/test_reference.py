"""Native tests of the translation logic (no wasm needed):

    python3 -m unittest discover -s plugins/reference-python/tests

The conformance suite (tests/conformance) checks the built component against the Rust
reference; these cover the checks and messages it does not reach.
"""

from __future__ import annotations

import json
import os
import sys
import unittest
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import reference  # noqa: E402
from reference import duration  # noqa: E402


def doc(kind: str, name: str, spec: Any) -> reference.Document:
    body = {"kind": kind, "metadata": {"name": name}}
    if spec is not ...:
        body["spec"] = spec
    return reference.Document(kind, name, f"{name}.yaml#1", json.dumps(body))


def run(*docs: reference.Document) -> reference.Output:
    return reference.translate(list(docs), "null")


def gateway(route: dict[str, Any], **host: Any) -> reference.Document:
    return doc("HttpGateway", "gw", {"port": 8080, "hosts": [{"routes": [route], **host}]})


class Errors(unittest.TestCase):
    def fails(self, d: reference.Document, field: str | None, words: str) -> None:
        with self.assertRaises(reference.PluginError) as caught:
            run(d)
        e = caught.exception
        self.assertEqual(e.document, d.id)
        self.assertEqual(e.field, field, e.message)
        self.assertIn(words, e.message)

    def test_schema(self) -> None:
        self.fails(doc("HttpGateway", "gw", ...), "spec", "missing field `port`")
        self.fails(doc("HttpGateway", "gw", {"port": 80}), "spec", "missing field `hosts`")
        self.fails(doc("HttpGateway", "gw", {"port": "80", "hosts": []}), "spec.port",
                   'invalid type: string "80", expected a port number')
        self.fails(doc("HttpGateway", "gw", {"port": 0, "hosts": []}), "spec.port",
                   "invalid value: integer `0`")
        self.fails(doc("Service", "s", {"endpoints": None}), "spec.endpoints",
                   "invalid type: null, expected a sequence")
        self.fails(doc("Service", "s", {"circuitBreakers": {"maxRequests": 1 << 32}}),
                   "spec.circuitBreakers.maxRequests", "expected u32")
        self.fails(doc("Service", "s", {"circuitBreakers": {"maxRequests": True}}),
                   "spec.circuitBreakers.maxRequests", "invalid type: boolean `true`")
        self.fails(doc("Service", "s", {"healthCheck": {"grpc": {"service": "x"}}}),
                   "spec.healthCheck.grpc.service", "expected `serviceName`")
        self.fails(doc("Service", "s", {"connectTimeout": 5}), "spec.connectTimeout",
                   "expected a duration string")
        self.fails(doc("Service", "s", {"loadBalancing": "leastConn"}), "spec.loadBalancing",
                   "unknown variant `leastConn`")
        self.fails(gateway({"backends": [{"service": "a"}],
                            "requestHeaders": {"set": {"x-n": 5}}}),
                   "spec.hosts[0].routes[0].requestHeaders.set.x-n", "invalid type: integer `5`")

    def test_service_checks(self) -> None:
        e = {"address": "10.0.0.1", "port": 80}
        self.fails(doc("Service", "s", {"connectTimeout": "0s"}), "spec.connectTimeout",
                   "longer than 0s")
        self.fails(doc("Service", "s", {"endpoints": [e], "localities": [{"endpoints": [e]}]}),
                   "spec.localities", "not both")
        self.fails(doc("Service", "s", {"endpoints": [e, {**e, "address": "10.0.0.1"}]}),
                   "spec.endpoints[1]", "10.0.0.1:80 is listed twice")
        self.fails(doc("Service", "s", {"endpoints": [{**e, "address": "fe80::1%eth0"}]}),
                   "spec.endpoints[0].address", "not an IP address")
        self.fails(doc("Service", "s", {"localities": [{"zone": "a"}, {"zone": "a"}]}),
                   "spec.localities[1]", "same region, zone and subZone")
        self.fails(doc("Service", "s", {"localities": [{"zone": "a"}, {"zone": "b", "priority": 2}]}),
                   "spec.localities[1].priority", "no locality has priority 1")
        self.fails(doc("Service", "s", {"healthCheck": {"interval": "1s"}}), "spec.healthCheck",
                   "one of them")
        self.fails(doc("Service", "s", {"healthCheck": {"grpc": {}}}), "spec.healthCheck.grpc",
                   "need protocol http2 or grpc")
        self.fails(doc("Service", "s", {"healthCheck": {"path": "/h", "healthyThreshold": 0}}),
                   "spec.healthCheck.healthyThreshold", "at least 1")
        self.fails(doc("Service", "s", {"healthCheck": {"path": "h"}}), "spec.healthCheck.path",
                   "must start with '/'")

    def test_gateway_checks(self) -> None:
        web = [{"service": "web"}]
        self.fails(doc("HttpGateway", "gw", {"port": 80, "hosts": []}), "spec.hosts",
                   "at least one host")
        self.fails(doc("HttpGateway", "gw", {"address": "localhost", "port": 80, "hosts": []}),
                   "spec.address", "not an IP address")
        self.fails(gateway({"backends": web}, hostnames=[]), "spec.hosts[0].hostnames",
                   "at least one hostname")
        self.fails(gateway({"backends": web}, hostnames=["a.*.com"]), "spec.hosts[0].hostnames[0]",
                   "wildcard")
        self.fails(gateway({}), "spec.hosts[0].routes[0].backends", "missing")
        self.fails(gateway({"backends": web, "directResponse": {"status": 200}}),
                   "spec.hosts[0].routes[0].directResponse", "not both")
        self.fails(gateway({"directResponse": {"status": 200}, "timeout": "1s"}),
                   "spec.hosts[0].routes[0].directResponse", "apply to backends")
        self.fails(gateway({"directResponse": {"status": 600}}),
                   "spec.hosts[0].routes[0].directResponse.status", "between 200 and 599")
        self.fails(gateway({"backends": web, "match": {"path": "/a", "regex": "/a"}}),
                   "spec.hosts[0].routes[0].match", "not several")
        self.fails(gateway({"backends": web, "match": {"regex": "a(b"}}),
                   "spec.hosts[0].routes[0].match.regex", 'invalid regex "a(b"')
        self.fails(gateway({"backends": web, "match": {"regex": "a(?=b)"}}),
                   "spec.hosts[0].routes[0].match.regex", "not supported by RE2")
        self.fails(gateway({"backends": web, "match": {"regex": "/v1", "headers": []}, "rewrite": {"pathPrefix": "/"}}),
                   "spec.hosts[0].routes[0].rewrite.pathPrefix", "not a regex")
        self.fails(gateway({"backends": web, "match": {"headers": [{"name": "x", "exact": "1", "present": True}]}}),
                   "spec.hosts[0].routes[0].match.headers[0]", "exactly one")
        self.fails(gateway({"backends": [{"service": "a"}, {"service": "a"}]}),
                   "spec.hosts[0].routes[0].backends[1].service", '"a" is listed twice')
        self.fails(gateway({"backends": [{"service": "a b"}]}),
                   "spec.hosts[0].routes[0].backends[0].service", "may contain only")
        self.fails(gateway({"backends": [{"service": "a", "weight": 4294967295}, {"service": "b"}]}),
                   "spec.hosts[0].routes[0].backends", "add up to more than")
        self.fails(gateway({"backends": web, "retries": {"on": "5xx,"}}),
                   "spec.hosts[0].routes[0].retries.on", 'unknown retry condition ""')
        self.fails(gateway({"backends": web, "retries": {"attempts": 0}}),
                   "spec.hosts[0].routes[0].retries.attempts", "at least 1")
        self.fails(gateway({"backends": web, "retries": {"statusCodes": [99]}}),
                   "spec.hosts[0].routes[0].retries.statusCodes[0]", "between 100 and 599")
        self.fails(gateway({"backends": web, "requestHeaders": {"remove": ["Host"]}}),
                   "spec.hosts[0].routes[0].requestHeaders.remove[0]", "off limits")
        self.fails(gateway({"backends": web}, responseHeaders={"set": {"x": "a\nb"}}),
                   "spec.hosts[0].responseHeaders.set.x", "CR, LF or NUL")
        self.fails(doc("HttpGateway", "gw", {"port": 80, "hosts": [
            {"name": "a", "hostnames": ["a"], "routes": [{"backends": web}]},
            {"name": "a", "hostnames": ["b"], "routes": [{"backends": web}]}]}),
            "spec.hosts[1].name", 'already named "a"')

    def test_other_kinds_and_config(self) -> None:
        self.fails(doc("GrpcService", "g", {}), None, 'does not translate kind "GrpcService"')
        with self.assertRaises(reference.PluginError) as caught:
            reference.translate([], '{"x": 1}')
        self.assertIn("unknown field `x`", caught.exception.message)
        self.assertEqual(reference.translate([], " {} ").resources, [])


class Output(unittest.TestCase):
    def test_service_without_endpoints_warns(self) -> None:
        out = run(doc("Service", "empty", ...))
        cla = out.resources[1]
        self.assertEqual(cla.body, {"cluster_name": "empty"})
        (warning,) = out.diagnostics
        self.assertEqual((warning.severity, warning.document, warning.field),
                         ("warning", "Service/empty", "spec.endpoints"))
        self.assertTrue(warning.message.endswith("(empty.yaml#1)"))

    def test_header_mutations_in_name_order(self) -> None:
        out = run(gateway({"backends": [{"service": "web"}],
                           "requestHeaders": {"add": {"b": "2", "a": "1"}, "set": {"z": "0"},
                                              "remove": ["y", "x"]}}))
        route = out.resources[1].body["virtual_hosts"][0]["routes"][0]
        self.assertEqual([h["header"]["key"] for h in route["request_headers_to_add"]], ["z", "a", "b"])
        self.assertEqual(route["request_headers_to_add"][0]["append_action"], "OVERWRITE_IF_EXISTS_OR_ADD")
        self.assertEqual(route["request_headers_to_remove"], ["y", "x"])

    def test_present_false_inverts(self) -> None:
        out = run(gateway({"backends": [{"service": "web"}],
                           "match": {"headers": [{"name": "x", "present": False, "invert": True}]}}))
        matcher = out.resources[1].body["virtual_hosts"][0]["routes"][0]["match"]["headers"][0]
        self.assertEqual(matcher, {"name": "x", "present_match": True})


class Durations(unittest.TestCase):
    def test_valid(self) -> None:
        ms = 1_000_000
        for text, nanos in [("250ms", 250 * ms), ("1s", 1000 * ms), ("1.5s", 1500 * ms),
                            (".5s", 500 * ms), ("1m30s", 90_000 * ms), ("2h", 7_200_000 * ms),
                            ("0s", 0), ("10us", 10_000), ("10µs", 10_000), ("7ns", 7),
                            ("0.0000000019s", 1)]:
            self.assertEqual(duration.parse(text), nanos, text)

    def test_invalid(self) -> None:
        for text, why in [("", "empty"), ("5", "missing unit"), ("5 s", "unknown unit"),
                          ("5x", "unknown unit"), ("-1s", "negative"), ("s", "expected a number"),
                          ("1..2s", "malformed"), (".s", "malformed"),
                          ("9" * 45 + "h", "too large"), ("100000000h", "too large")]:
            with self.assertRaises(duration.DurationError) as caught:
                duration.parse(text)
            self.assertIn(why, str(caught.exception), text)

    def test_proto_json(self) -> None:
        self.assertEqual(duration.to_proto_json(250_000_000), "0.250s")
        self.assertEqual(duration.to_proto_json(7200 * 10**9), "7200s")
        self.assertEqual(duration.to_proto_json(1_000_001_000), "1.000001s")
        self.assertEqual(duration.to_proto_json(5), "0.000000005s")


if __name__ == "__main__":
    unittest.main()
