// {{name}}: an xdst translation plugin in AssemblyScript.
//
// Translates `{{kind}}` documents
//   kind: {{kind}}
//   metadata: {name: web}
//   spec: {address: 10.0.0.1, port: 8080}
// into one STATIC Envoy Cluster named after the document. It speaks xdst's core-module ABI
// (proto/core-abi/README.md in the xdst repository): the exports below, JSON in and out
// through linear memory, and the optional import `xdst.log`.

import { Kind, Value, parseError, parseUtf8, toUtf8 } from "./json";
import { DEBUG, log } from "./log";

const KIND = "{{kind}}";
const CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

// --- the ABI ---------------------------------------------------------------------------------

/** The ABI version marker: xdst looks for it; it is never called. */
export function xdst_plugin_abi_0_1_0(): void {}

/** Memory for the host to write the request into (outside the GC, so it stays put). */
export function xdst_alloc(len: i32): usize {
  return heap.alloc(<usize>len);
}

/** The plugin's description. */
export function xdst_describe(): u64 {
  return respond(
    Value.object()
      .set("name", Value.string("{{name}}"))
      .set("version", Value.string("0.1.0"))
      .set("kinds", Value.array().push(Value.string(KIND)))
      .set("phase", Value.string("translate"))
      .set("granularity", Value.string("per-document")),
  );
}

/** Translates a request: `{"ok": {resources, diagnostics}}` or `{"error": {...}}`. */
export function xdst_translate(ptr: usize, len: i32): u64 {
  const request = parseUtf8(ptr, <usize>len);
  if (request === null) return respond(error("the request is not JSON: " + parseError, null, null));
  const resources = Value.array();
  const documents = request.get("documents");
  if (documents !== null) {
    for (let i = 0; i < documents.items.length; i++) {
      const failure = translate(documents.items[i], resources);
      if (failure !== null) return respond(failure);
    }
  }
  log(DEBUG, "translated " + resources.items.length.toString() + " documents");
  return respond(Value.object().set("ok", Value.object().set("resources", resources).set("diagnostics", Value.array())));
}

/** The response, kept in a global so the garbage collector leaves it for the host to read. */
let response = new ArrayBuffer(0);

function respond(v: Value): u64 {
  response = toUtf8(v);
  return (<u64>changetype<usize>(response) << 32) | <u64>response.byteLength;
}

// --- the translation -------------------------------------------------------------------------

/** A plugin error; `document` is `Kind/name`, `field` a path such as `spec.port`. */
function error(message: string, document: string | null, field: string | null): Value {
  const e = Value.object().set("message", Value.string(message));
  if (document !== null) e.set("document", Value.string(document));
  if (field !== null) e.set("field", Value.string(field));
  return Value.object().set("error", e);
}

/** Appends one document's Cluster to `resources`; returns an error response, or null. */
function translate(doc: Value, resources: Value): Value | null {
  const name = doc.get("name");
  const json = doc.get("json");
  if (name === null || !name.isString() || json === null) return error("malformed document", null, null);
  const id = KIND + "/" + name.str;
  const spec = json.get("spec");
  if (spec === null || spec.kind != Kind.Object) return error("missing: {address, port}", id, "spec");
  const address = spec.get("address");
  if (address === null || !address.isString() || address.str.length == 0) {
    return error("missing: an IP address such as 10.0.0.1", id, "spec.address");
  }
  const p = spec.get("port");
  const port = p !== null ? p.asInteger(0) : 0;
  if (port < 1 || port > 65535) return error("must be a port number from 1 to 65535", id, "spec.port");

  const socket = Value.object()
    .set("address", Value.string(address.str))
    .set("port_value", Value.integer(port));
  const endpoint = Value.object().set("address", Value.object().set("socket_address", socket));
  const assignment = Value.object()
    .set("cluster_name", Value.string(name.str))
    .set("endpoints", Value.array().push(
      Value.object().set("lb_endpoints", Value.array().push(Value.object().set("endpoint", endpoint))),
    ));
  const cluster = Value.object()
    .set("name", Value.string(name.str))
    .set("type", Value.string("STATIC"))
    .set("load_assignment", assignment);
  resources.push(
    Value.object()
      .set("typeUrl", Value.string(CLUSTER))
      .set("name", Value.string(name.str))
      .set("document", Value.string(id))
      .set("body", Value.object().set("json", cluster)),
  );
  return null;
}
