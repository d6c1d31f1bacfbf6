// The plugin contract's types as this port uses them: intent documents, plugin errors and
// diagnostics, and the failure state that stands in for exceptions.
//
// AssemblyScript has no exceptions, so a failing check records the first error in `failure`
// and returns; callers test `failed()` after each step that can fail and return too. The
// first error wins, as `?` does in the Rust reference.

import { Value } from "./json";

/** One intent document of the request: `{kind, name, origin, json}`. */
export class Doc {
  constructor(
    public kind: string,
    public name: string,
    public origin: string,
    public json: Value,
  ) {}

  /** `Kind/name`: how resources, errors and diagnostics name this document. */
  id(): string {
    return this.kind + "/" + this.name;
  }
}

/** A plugin error: `{message, document, field}` (document and field may be null). */
export class PluginError {
  constructor(
    public message: string,
    public document: string | null,
    public field: string | null,
  ) {}

  toJson(): Value {
    const v = Value.object().setString("message", this.message);
    const document = this.document;
    if (document !== null) v.setString("document", document);
    const field = this.field;
    if (field !== null) v.setString("field", field);
    return v;
  }
}

/** The first error of this call, if any. */
export let failure: PluginError | null = null;

export function failed(): bool {
  return failure !== null;
}

/** Resets the failure state (xdst gives each call a fresh instance; a reused one needs this). */
export function clearFailure(): void {
  failure = null;
}

/** Records an error about `field` of `doc`. Returns false, for `return fail(...)`. */
export function fail(doc: Doc, field: string, message: string): bool {
  if (failure === null) failure = new PluginError(message, doc.id(), field);
  return false;
}

/** Records an error about `doc` as a whole. */
export function failDocument(doc: Doc, message: string): bool {
  if (failure === null) failure = new PluginError(message, doc.id(), null);
  return false;
}

/** Records an error about no document in particular. */
export function failPlugin(message: string): bool {
  if (failure === null) failure = new PluginError(message, null, null);
  return false;
}

/** A warning about `field` of `doc`, its message ending with the document's origin. */
export function warning(doc: Doc, field: string, message: string): Value {
  const text = doc.origin.length ? message + " (" + doc.origin + ")" : message;
  return Value.object()
    .setString("severity", "warning")
    .setString("message", text)
    .setString("document", doc.id())
    .setString("field", field);
}

/** `{"typeUrl", "name", "document", "body": {"json": message}}`: one resource of the response. */
export function resource(typeName: string, name: string, doc: Doc, message: Value): Value {
  return Value.object()
    .setString("typeUrl", "type.googleapis.com/" + typeName)
    .setString("name", name)
    .setString("document", doc.id())
    .set("body", Value.object().set("json", message));
}
