// Intent documents as the plugin reads them, and the errors and warnings that name them
// (`Kind/name`) and the field at fault (`spec.hosts[0].routes[1].backends`).

import { JsonError, field, parseJson } from "./json.js";
import { SchemaError, at, formatPath } from "./schema.js";

/** A failure the plugin reports itself: WIT `plugin-error`. Anything else thrown is a trap. */
export class PluginError extends Error {
  constructor(message, document, field) {
    super(message);
    this.document = document;
    this.field = field;
  }

  /** The WIT record (`option<string>`s as null when absent). */
  toWit() {
    return { message: this.message, document: this.document ?? null, field: this.field ?? null };
  }
}

export class IntentDocument {
  /** `doc` is the WIT `intent-document`: {kind, name, origin, json}. */
  constructor(doc) {
    this.kind = doc.kind;
    this.name = doc.name;
    this.origin = doc.origin;
    this.json = doc.json;
  }

  /** `Kind/name`: how resources, errors and diagnostics name this document. */
  get id() {
    return `${this.kind}/${this.name}`;
  }

  /**
   * Reads `spec` with a decoder from schema.js (an absent or null spec reads as `{}`). Errors
   * name this document and the field.
   */
  spec(decode) {
    let root;
    try {
      root = parseJson(this.json);
    } catch (e) {
      if (e instanceof JsonError) throw this.errorHere(e.message);
      throw e;
    }
    if (root.t !== "map") throw this.errorHere("the document is not a JSON object");
    if (root.v.filter(([k]) => k === "spec").length > 1) throw this.errorHere("duplicate field `spec`");
    let spec = field(root, "spec");
    if (spec === undefined || spec.t === "null") spec = { t: "map", v: [] };
    try {
      return decode(spec, at(null, "spec"));
    } catch (e) {
      if (e instanceof SchemaError) throw this.error(formatPath(e.path), e.message);
      throw e;
    }
  }

  /** An error about `field` of this document. */
  error(field, message) {
    return new PluginError(message, this.id, field);
  }

  /** An error about this document as a whole. */
  errorHere(message) {
    return new PluginError(message, this.id);
  }

  /** Throws an error about `field` if a check from check.js found a `problem`. */
  expect(field, problem) {
    if (problem !== undefined) throw this.error(field, problem);
  }

  /** A warning about `field`, for the response's diagnostics; ends with the document's origin. */
  warning(field, message) {
    return {
      severity: "warning",
      message: this.origin ? `${message} (${this.origin})` : message,
      document: this.id,
      field,
    };
  }
}
