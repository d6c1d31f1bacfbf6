// Reading intent `spec`s the way the Rust reference does with serde: each decoder takes a JSON
// node (json.js) and its path (see `at`) and returns a plain value, or throws a
// SchemaError naming the path and saying what is wrong in serde's words ("unknown field
// `timout`, expected one of ...", "invalid value: integer `70000`, expected u16"). Structs
// refuse unknown fields and check keys in the order written, then missing fields in declaration
// order, as serde does.

import { parseDuration } from "./duration.js";
import { compareStrings, debug } from "./text.js";

export class SchemaError extends Error {
  constructor(path, message) {
    super(message);
    this.path = path;
  }
}

/**
 * A path is a chain of segments (field names and list indexes) from the innermost out:
 * `at(at(at(null, "spec"), "hosts"), 0)`. It is built for every value read, and shown only
 * in errors.
 */
export function at(up, segment) {
  return { up, segment };
}

/** `spec.hosts[0].routes[1]`: how a path is shown. */
export function formatPath(path) {
  let out = "";
  for (let p = path; p !== null; p = p.up) {
    const s = p.segment;
    out = (typeof s === "number" ? `[${s}]` : p.up === null ? s : `.${s}`) + out;
  }
  return out;
}

/** How serde_json names a value it did not expect: `integer \`5\``, `string "x"`, `map`. */
function unexpected(node) {
  switch (node.t) {
    case "null":
      return "null";
    case "bool":
      return `boolean \`${node.v}\``;
    case "str":
      return `string ${debug(node.v)}`;
    case "int":
      return `integer \`${node.v}\``;
    case "float":
      return `floating point \`${formatFloat(node.v)}\``;
    case "seq":
      return "sequence";
    default:
      return "map";
  }
}

function formatFloat(x) {
  const s = String(x);
  if (s.includes("e")) return s.replace("e+", "e");
  return Number.isInteger(x) ? `${s}.0` : s;
}

function invalidType(node, path, expected) {
  return new SchemaError(path, `invalid type: ${unexpected(node)}, expected ${expected}`);
}

/** serde's list of names: `a`, `a` or `b`, one of `a`, `b`, `c`. */
function oneOf(names) {
  const quoted = names.map((n) => `\`${n}\``);
  if (quoted.length === 1) return quoted[0];
  if (quoted.length === 2) return `${quoted[0]} or ${quoted[1]}`;
  return `one of ${quoted.join(", ")}`;
}

export function string(node, path) {
  if (node.t !== "str") throw invalidType(node, path, "a string");
  return node.v;
}

export function bool(node, path) {
  if (node.t !== "bool") throw invalidType(node, path, "a boolean");
  return node.v;
}

/** An unsigned integer of at most `max`, named like the Rust type (`u32`). */
function unsigned(max, expected) {
  return (node, path) => {
    if (node.t !== "int") throw invalidType(node, path, expected);
    if (node.v < 0n || node.v > max) {
      throw new SchemaError(path, `invalid value: integer \`${node.v}\`, expected ${expected}`);
    }
    return Number(node.v);
  };
}

export const u16 = unsigned(0xffffn, "u16");
export const u32 = unsigned(0xffff_ffffn, "u32");

/** A TCP port, 1 to 65535. */
export function port(node, path) {
  const expected = "a port number from 1 to 65535";
  if (node.t !== "int") throw invalidType(node, path, expected);
  if (node.v < 1n || node.v > 65535n) {
    throw new SchemaError(path, `invalid value: integer \`${node.v}\`, expected ${expected}`);
  }
  return Number(node.v);
}

/** A duration string (`250ms`), as BigInt nanoseconds. */
export function duration(node, path) {
  if (node.t !== "str") throw invalidType(node, path, "a duration string such as 250ms, 1s or 1m30s");
  try {
    return parseDuration(node.v);
  } catch (e) {
    throw new SchemaError(path, e.message);
  }
}

/**
 * A unit-only Rust enum: one of `variants` (camelCase), written as a string or, as serde_json
 * also reads it, as `{variant: null}`.
 */
export function oneOfStrings(variants) {
  const unknown = (v, path) => new SchemaError(path, `unknown variant \`${v}\`, expected ${oneOf(variants)}`);
  return (node, path) => {
    if (node.t === "str") {
      if (!variants.includes(node.v)) throw unknown(node.v, path);
      return node.v;
    }
    if (node.t !== "map" || node.v.length === 0) throw new SchemaError(path, "expected value");
    const [variant, value] = node.v[0];
    if (!variants.includes(variant)) throw unknown(variant, path);
    if (value.t !== "null") throw invalidType(value, at(path, variant), "unit");
    if (node.v.length > 1) throw new SchemaError(path, "expected value");
    return variant;
  };
}

export function list(item) {
  return (node, path) => {
    if (node.t !== "seq") throw invalidType(node, path, "a sequence");
    return node.v.map((n, i) => item(n, at(path, i)));
  };
}

/** A map of string keys; returns [key, value] entries in code point order of the keys. */
export function map(value) {
  return (node, path) => {
    if (node.t !== "map") throw invalidType(node, path, "a map");
    const out = new Map();
    for (const [k, v] of node.v) out.set(k, value(v, at(path, k)));
    return [...out].sort(([a], [b]) => compareStrings(a, b));
  };
}

// Field kinds of a struct: required, optional (absent or null: undefined), or with a default
// when absent (serde's `#[serde(default)]`: null is still an error).
export const required = (decode) => ({ decode, kind: "required" });
export const optional = (decode) => ({ decode, kind: "optional" });
export const withDefault = (decode, make) => ({ decode, kind: "default", make });

/**
 * A struct with `fields` (`{jsonName: required(...) | optional(...) | withDefault(...)}`, in the
 * Rust declaration order) that refuses unknown fields. `rustName` appears in messages.
 */
export function struct(rustName, fields) {
  const names = Object.keys(fields);
  return (node, path) => {
    if (node.t === "seq") return structFromSeq(rustName, fields, node, path);
    if (node.t !== "map") throw invalidType(node, path, `struct ${rustName}`);
    const out = {};
    const seen = new Set();
    for (const [key, value] of node.v) {
      const f = Object.prototype.hasOwnProperty.call(fields, key) ? fields[key] : undefined;
      if (f === undefined) {
        const expected = names.length === 0 ? "there are no fields" : `expected ${oneOf(names)}`;
        throw new SchemaError(at(path, key), `unknown field \`${key}\`, ${expected}`);
      }
      if (seen.has(key)) throw new SchemaError(path, `duplicate field \`${key}\``);
      seen.add(key);
      if (f.kind === "optional" && value.t === "null") out[key] = undefined;
      else out[key] = f.decode(value, at(path, key));
    }
    for (const key of names) {
      if (seen.has(key)) continue;
      const f = fields[key];
      if (f.kind === "required") throw new SchemaError(path, `missing field \`${key}\``);
      out[key] = f.kind === "default" ? f.make() : undefined;
    }
    return out;
  };
}

/** serde also reads a struct from a list of its fields' values, in declaration order. */
function structFromSeq(rustName, fields, node, path) {
  const names = Object.keys(fields);
  const out = {};
  names.forEach((key, i) => {
    const f = fields[key];
    const value = node.v[i];
    if (value === undefined) {
      if (f.kind !== "default") {
        throw new SchemaError(path, `invalid length ${i}, expected struct ${rustName} with ${names.length} elements`);
      }
      out[key] = f.make();
    } else if (f.kind === "optional" && value.t === "null") out[key] = undefined;
    else out[key] = f.decode(value, at(path, i));
  });
  if (node.v.length > names.length) throw new SchemaError(path, "trailing characters");
  return out;
}
