import assert from "node:assert/strict";
import { test } from "node:test";

import { PluginError, translateDocument } from "../src/translate.js";

const doc = (spec) => ({ kind: "{{kind}}", name: "backend", origin: "test", json: JSON.stringify({ spec }) });

test("one cluster per document", () => {
  const [cluster] = translateDocument(doc({ address: "10.0.0.1", port: 8080 }));
  assert.equal(cluster.document, "{{kind}}/backend");
  assert.equal(JSON.parse(cluster.body.val).load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value, 8080);
});

test("a bad port names the field", () => {
  for (const port of [undefined, 0, 65536, "80"]) {
    assert.throws(() => translateDocument(doc({ address: "10.0.0.1", port })), (e) => e instanceof PluginError && e.field === "spec.port");
  }
  assert.throws(() => translateDocument(doc({ port: 80 })), { field: "spec.address" });
});
