// Runs the built plugin (build/{{name}}.wasm, from `xdst plugin build`) the way xdst does:
// a fresh instance per call, the request written into memory from xdst_alloc.
//   node --test test/
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const module = new WebAssembly.Module(readFileSync(new URL("../build/{{name}}.wasm", import.meta.url)));

function call(name, request) {
  let memory;
  const logs = [];
  const log = (level, ptr, len) => logs.push(Buffer.from(memory.buffer, ptr, len).toString());
  const { exports } = new WebAssembly.Instance(module, { xdst: { log } });
  memory = exports.memory;
  let result;
  if (request === undefined) result = exports[name]();
  else {
    const bytes = Buffer.from(JSON.stringify(request));
    const ptr = exports.xdst_alloc(bytes.length);
    new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
    result = exports[name](ptr, bytes.length);
  }
  const ptr = Number(BigInt.asUintN(64, result) >> 32n);
  const len = Number(BigInt.asUintN(64, result) & 0xffffffffn);
  return JSON.parse(Buffer.from(memory.buffer, ptr, len).toString());
}

const doc = (spec) => ({
  kind: "{{kind}}", name: "web", origin: "web.yaml#1",
  json: { kind: "{{kind}}", metadata: { name: "web" }, spec },
});
const translate = (...docs) => call("xdst_translate", { nodeGroup: "", documents: docs, resources: [], config: null });

test("describes itself", () => {
  assert.deepEqual(call("xdst_describe"), {
    name: "{{name}}", version: "0.1.0", kinds: ["{{kind}}"], phase: "translate", granularity: "per-document",
  });
});

test("translates a document into a STATIC cluster", () => {
  const { ok } = translate(doc({ address: "10.0.0.1", port: 8080 }));
  assert.equal(ok.resources.length, 1);
  const [r] = ok.resources;
  assert.equal(r.document, "{{kind}}/web");
  assert.equal(r.body.json.type, "STATIC");
  assert.deepEqual(r.body.json.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address,
    { address: "10.0.0.1", port_value: 8080 });
});

test("refuses a bad port, naming the document and field", () => {
  for (const spec of [{ address: "10.0.0.1" }, { address: "10.0.0.1", port: 0 }, { address: "10.0.0.1", port: 70000 }]) {
    const { error } = translate(doc(spec));
    assert.equal(error.document, "{{kind}}/web");
    assert.equal(error.field, "spec.port");
  }
});

test("refuses a missing address", () => {
  assert.equal(translate(doc({ port: 80 })).error.field, "spec.address");
});
