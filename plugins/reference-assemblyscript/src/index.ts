// The reference translator (plugins/reference) in AssemblyScript, for the `Service` and
// `HttpGateway` kinds, speaking xdst's core-module ABI (proto/core-abi/README.md): JSON in
// and out through linear memory.
//
// | kind        | produces (each named `metadata.name`)                             |
// |-------------|-------------------------------------------------------------------|
// | Service     | an EDS Cluster and its ClusterLoadAssignment                      |
// | HttpGateway | a Listener (HTTP, RDS over ADS) and its RouteConfiguration        |
//
// Same schema, defaults, checks and output as the Rust original (tests/conformance checks it);
// GrpcService is not ported. Each document translates on its own (`per-document`).
//
// The request is streamed: documents are parsed, translated and written to the response one at
// a time, so the garbage collector only ever has one document's objects to trace.

import { Kind, Parser, Value, Writer, clearParseError, parse, parseError } from "./json";
import { Doc, clearFailure, failDocument, failPlugin, failure } from "./plugin";
import { translateService } from "./service";
import { translateGateway } from "./gateway";
import { quote } from "./text";
import { unexpected } from "./de";

const KINDS: Array<string> = ["Service", "HttpGateway"];

/** The ABI version marker; never called. */
export function xdst_plugin_abi_0_1_0(): void {}

/**
 * Memory for the host to write the request into: raw heap memory, outside the garbage
 * collector, so nothing reclaims it before `xdst_translate` has read it.
 */
export function xdst_alloc(len: i32): usize {
  return heap.alloc(<usize>len);
}

/** The last response, kept in a global so it stays reachable after the call returns. */
let response: ArrayBuffer = new ArrayBuffer(0);

function respond(bytes: ArrayBuffer): u64 {
  response = bytes;
  return (<u64>changetype<usize>(response) << 32) | <u64>response.byteLength;
}

export function xdst_describe(): u64 {
  const kinds = Value.array();
  for (let i = 0; i < KINDS.length; i++) kinds.push(Value.string(KINDS[i]));
  const w = new Writer();
  w.value(
    Value.object()
      .setString("name", "reference-assemblyscript")
      .setString("version", "0.1.0")
      .set("kinds", kinds)
      .setString("phase", "translate")
      .setString("granularity", "per-document"),
  );
  return respond(w.bytes());
}

export function xdst_translate(ptr: usize, len: i32): u64 {
  clearFailure();
  clearParseError();
  const w = new Writer();
  w.ascii('{"ok":{"resources":[');
  const diagnostics = new Array<Value>();
  translate(String.UTF8.decodeUnsafe(ptr, <usize>len), w, diagnostics);
  const error = failure;
  if (error !== null) {
    const e = new Writer();
    e.ascii('{"error":');
    e.value(error.toJson());
    e.ascii("}");
    return respond(e.bytes());
  }
  w.ascii('],"diagnostics":[');
  for (let i = 0; i < diagnostics.length; i++) {
    if (i > 0) w.ascii(",");
    w.value(diagnostics[i]);
  }
  w.ascii("]}}");
  return respond(w.bytes());
}

/**
 * Reads the translate-request `{nodeGroup, documents, resources, config}` in `text` and writes
 * each document's resources to `out` (comma-separated). Errors go to `failure`.
 */
function translate(text: string, out: Writer, diagnostics: Array<Value>): void {
  const p = new Parser(text);
  if (!p.eat(0x7b)) {
    failPlugin("malformed request: not a JSON object");
    return;
  }
  // One pass over the envelope to find `documents` (skipped for now) and `config`.
  let documentsAt = -1;
  let config: Value | null = null;
  if (!p.eat(0x7d)) {
    while (true) {
      p.ws();
      if (p.i >= text.length || text.charCodeAt(p.i) != 0x22) return malformed(p, "expected a key");
      const key = p.string();
      if (!p.eat(0x3a)) return malformed(p, "expected ':'");
      if (key == "documents") {
        p.ws();
        documentsAt = p.i;
        p.skip();
      } else if (key == "config") config = p.value();
      else p.skip();
      if (parseError.length) return malformed(p, "");
      if (p.eat(0x7d)) break;
      if (!p.eat(0x2c)) return malformed(p, "expected ',' or '}'");
    }
  }
  if (!checkConfig(config)) return;
  if (documentsAt < 0) {
    failPlugin("malformed request: no documents");
    return;
  }

  p.i = documentsAt;
  if (!p.eat(0x5b)) {
    failPlugin("malformed request: documents is not a list");
    return;
  }
  if (p.eat(0x5d)) return;
  const resources = new Array<Value>();
  let written = 0;
  for (let i = 0; ; i++) {
    const d = p.value();
    if (parseError.length) return malformed(p, "");
    const doc = document(d, i);
    if (doc === null) return;
    if (doc.kind == "Service") translateService(doc, resources, diagnostics);
    else if (doc.kind == "HttpGateway") translateGateway(doc, resources);
    else {
      const kinds = KINDS.join(", ");
      failDocument(doc, "the reference plugin does not translate kind " + quote(doc.kind) + " (it translates " + kinds + ")");
    }
    if (failure !== null) return;
    for (let r = 0; r < resources.length; r++) {
      if (written++ > 0) out.ascii(",");
      out.value(resources[r]);
    }
    resources.length = 0;
    if (p.eat(0x5d)) break;
    if (!p.eat(0x2c)) return malformed(p, "expected ',' or ']'");
  }
}

function malformed(p: Parser, what: string): void {
  const why = parseError.length ? parseError : what + " at character " + p.i.toString();
  failPlugin("malformed request: " + why);
}

/** An intent-document `{kind, name, origin, json}`; its json may also be a string holding it. */
function document(d: Value, i: i32): Doc | null {
  const kind = d.get("kind");
  const name = d.get("name");
  const origin = d.get("origin");
  let json = d.get("json");
  const at = "malformed request: documents[" + i.toString() + "]";
  if (kind === null || kind.kind != Kind.String || name === null || name.kind != Kind.String || json === null) {
    failPlugin(at + " lacks kind, name or json");
    return null;
  }
  if (json.kind == Kind.String) {
    json = parse(json.str);
    if (json === null) {
      failPlugin(at + ".json: " + parseError);
      return null;
    }
  }
  return new Doc(kind.str, name.str, origin !== null && origin.kind == Kind.String ? origin.str : "", json);
}

/** The plugin takes no configuration: `null` or `{}`. */
function checkConfig(config: Value | null): bool {
  if (config === null || config.kind == Kind.Null) return true;
  let why = "";
  if (config.kind == Kind.Object) {
    if (config.items.length) why = "unknown field `" + config.items[0].key + "`, there are no fields";
  } else if (config.kind == Kind.Array) {
    if (config.items.length) {
      why = "invalid length " + config.items.length.toString() + ", expected struct Config with 0 elements";
    }
  } else why = "invalid type: " + unexpected(config) + ", expected struct Config";
  if (why.length == 0) return true;
  failPlugin("plugin configuration: " + why + " (the reference plugin takes none)");
  return false;
}
