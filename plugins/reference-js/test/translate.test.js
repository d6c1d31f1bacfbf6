import assert from "node:assert/strict";
import { test } from "node:test";

import { PluginError } from "../src/document.js";
import { describe, translate } from "../src/translate.js";

function request(...docs) {
  return {
    nodeGroup: "",
    documents: docs.map((d, i) => ({ kind: d.kind, name: d.metadata.name, origin: `test.yaml#${i + 1}`, json: JSON.stringify(d) })),
    resources: [],
    config: "null",
  };
}

/** The PluginError a request fails with, as {document, field, message}. */
function failure(req) {
  try {
    translate(req);
  } catch (e) {
    assert.ok(e instanceof PluginError, `a plugin error, not ${e}`);
    return { document: e.document, field: e.field, message: e.message };
  }
  assert.fail("translated");
}

const service = (spec, name = "web") => ({ kind: "Service", metadata: { name }, spec });
const gateway = (spec, name = "public") => ({ kind: "HttpGateway", metadata: { name }, spec });
const route = (r) => gateway({ port: 8080, hosts: [{ routes: [r] }] });

test("describe", () => {
  assert.deepEqual(describe(), {
    name: "reference-js",
    version: "0.1.0",
    kinds: ["Service", "HttpGateway"],
    phase: "translate",
    granularity: "per-document",
  });
});

test("a Service without endpoints translates, with a warning naming its origin", () => {
  const out = translate(request({ kind: "Service", metadata: { name: "empty" } }));
  assert.equal(out.resources.length, 2);
  assert.deepEqual(JSON.parse(out.resources[1].body.val), { cluster_name: "empty", endpoints: [] });
  assert.deepEqual(out.diagnostics, [{
    severity: "warning",
    message: "no endpoints: requests to this service fail until it has some (test.yaml#1)",
    document: "Service/empty",
    field: "spec.endpoints",
  }]);
});

test("schema errors name the field as serde_path_to_error does", () => {
  const cases = [
    [gateway({ hosts: [] }), "spec", "missing field `port`"],
    [gateway({ port: "80", hosts: [] }), "spec.port", 'invalid type: string "80", expected a port number from 1 to 65535'],
    [gateway({ port: 0, hosts: [] }), "spec.port", "invalid value: integer `0`, expected a port number from 1 to 65535"],
    [route({}), "spec.hosts[0].routes[0].backends", "missing: the services to send requests to (or a directResponse)"],
    [route({ backends: [{}] }), "spec.hosts[0].routes[0].backends[0]", "missing field `service`"],
    [route({ backends: [{ service: "a", wieght: 1 }] }), "spec.hosts[0].routes[0].backends[0].wieght",
      "unknown field `wieght`, expected `service` or `weight`"],
    [route({ backends: [{ service: "a" }], rewrite: { prefix: "/" } }), "spec.hosts[0].routes[0].rewrite.prefix",
      "unknown field `prefix`, expected `pathPrefix`"],
    [route({ directResponse: { status: 70000 } }), "spec.hosts[0].routes[0].directResponse.status",
      "invalid value: integer `70000`, expected u16"],
    [route({ backends: [{ service: "a", weight: -1 }] }), "spec.hosts[0].routes[0].backends[0].weight",
      "invalid value: integer `-1`, expected u32"],
    [route({ backends: [{ service: "a", weight: 1.5 }] }), "spec.hosts[0].routes[0].backends[0].weight",
      "invalid type: floating point `1.5`, expected u32"],
    [route({ backends: "a" }), "spec.hosts[0].routes[0].backends", 'invalid type: string "a", expected a sequence'],
    [route({ backends: [{ service: "a" }], requestHeaders: { set: { "x-a": 1 } } }),
      "spec.hosts[0].routes[0].requestHeaders.set.x-a", "invalid type: integer `1`, expected a string"],
    [service({ endpoints: null }), "spec.endpoints", "invalid type: null, expected a sequence"],
    [service({ healthCheck: "yes" }), "spec.healthCheck", 'invalid type: string "yes", expected struct HealthCheckSpec'],
    [service({ connectTimeout: 5 }), "spec.connectTimeout",
      "invalid type: integer `5`, expected a duration string such as 250ms, 1s or 1m30s"],
  ];
  for (const [doc, field, message] of cases) {
    assert.deepEqual(failure(request(doc)), { document: `${doc.kind}/${doc.metadata.name}`, field, message });
  }
});

test("checks after the schema name the field", () => {
  const cases = [
    [service({ endpoints: [{ address: "10.0.0.1", port: 80 }, { address: "10.0.0.1", port: 80 }] }), "spec.endpoints[1]"],
    [service({ endpoints: [{ address: "::1", port: 80 }, { address: "0:0::1", port: 80 }] }), "spec.endpoints[1]"],
    [service({ localities: [{ priority: 1 }] }), "spec.localities[0].priority"],
    [service({ localities: [{ zone: "a" }, { zone: "a" }] }), "spec.localities[1]"],
    [service({ healthCheck: { grpc: {} } }), "spec.healthCheck.grpc"],
    [service({ healthCheck: {} }), "spec.healthCheck"],
    [route({ match: { path: "/a", regex: "a" }, backends: [{ service: "a" }] }), "spec.hosts[0].routes[0].match"],
    [route({ match: { regex: "a(" }, backends: [{ service: "a" }] }), "spec.hosts[0].routes[0].match.regex"],
    [route({ match: { regex: "/a" }, backends: [{ service: "a" }], rewrite: { pathPrefix: "/" } }),
      "spec.hosts[0].routes[0].rewrite.pathPrefix"],
    [route({ backends: [{ service: "a" }, { service: "a" }] }), "spec.hosts[0].routes[0].backends[1].service"],
    [route({ directResponse: { status: 200 }, timeout: "1s" }), "spec.hosts[0].routes[0].directResponse"],
    [route({ backends: [{ service: "a" }], retries: { on: "5xx,bogus" } }), "spec.hosts[0].routes[0].retries.on"],
    [route({ backends: [{ service: "a" }], responseHeaders: { set: { host: "x" } } }), "spec.hosts[0].routes[0].responseHeaders.set"],
    [route({ backends: [{ service: "a" }], responseHeaders: { add: { "x-a": "a\nb" } } }),
      "spec.hosts[0].routes[0].responseHeaders.add.x-a"],
  ];
  for (const [doc, field] of cases) assert.equal(failure(request(doc)).field, field, JSON.stringify(doc.spec));
});

test("header matches: present false inverts, invert inverts back", () => {
  const out = translate(request(route({
    match: { headers: [{ name: "x-a", present: false }, { name: "x-b", present: false, invert: true }] },
    backends: [{ service: "a" }],
  })));
  const routes = JSON.parse(out.resources[1].body.val);
  assert.deepEqual(routes.virtual_hosts[0].routes[0].match.headers, [
    { name: "x-a", present_match: true, invert_match: true },
    { name: "x-b", present_match: true },
  ]);
});

test("configuration: none, or {}", () => {
  for (const config of ["null", "", " {} "]) translate({ ...request(), config });
  assert.throws(() => translate({ ...request(), config: '{"a": 1}' }), {
    message: "plugin configuration: unknown field `a`, there are no fields (the reference-js plugin takes none)",
  });
});

test("kinds it does not translate are errors", () => {
  const doc = { kind: "GrpcService", metadata: { name: "echo" }, spec: {} };
  assert.equal(failure(request(doc)).document, "GrpcService/echo");
});
