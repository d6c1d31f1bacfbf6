// Reading typed values out of a document's JSON, with serde's rules and wording: what the
// Rust reference gets from `#[derive(Deserialize)]` and `serde_path_to_error`. Every reader
// takes the field path of the value (`spec.hosts[0].routes[1].timeout`) and, on a wrong value,
// records an error naming it and returns a placeholder (check `failed()`).

import { Kind, Value } from "./json";
import { Doc, fail, failed } from "./plugin";
import { oneOf, quote, sortStrings } from "./text";
import { Dur, durationError, parseDuration } from "./duration";

/** serde's `Unexpected`: how a wrong value is described (`integer \`5\``, `string "x"`). */
export function unexpected(v: Value): string {
  switch (v.kind) {
    case Kind.Null:
      return "null";
    case Kind.Bool:
      return "boolean `" + (v.bool ? "true" : "false") + "`";
    case Kind.Number:
      return (v.isInteger() ? "integer `" : "floating point `") + v.num + "`";
    case Kind.String:
      return "string " + quote(v.str);
    case Kind.Array:
      return "sequence";
    default:
      return "map";
  }
}

export function invalidType(doc: Doc, path: string, v: Value, expected: string): void {
  fail(doc, path, "invalid type: " + unexpected(v) + ", expected " + expected);
}

/** Checks that `v` is an object for struct `name`. */
export function expectStruct(doc: Doc, path: string, v: Value, name: string): bool {
  if (v.kind == Kind.Object) return true;
  invalidType(doc, path, v, "struct " + name);
  return false;
}

/** The error for a key a struct does not have (`path` ends with the key). */
export function unknownField(doc: Doc, path: string, key: string, fields: Array<string>): void {
  fail(doc, path, "unknown field `" + key + "`, " + oneOf(fields));
}

/** The error for a required field that is absent (`path` is the struct's). */
export function missingField(doc: Doc, path: string, key: string): void {
  fail(doc, path, "missing field `" + key + "`");
}

export function readString(doc: Doc, path: string, v: Value): string {
  if (v.kind == Kind.String) return v.str;
  invalidType(doc, path, v, "a string");
  return "";
}

/** An `Option<String>`: null reads as absent. */
export function readOptString(doc: Doc, path: string, v: Value): string | null {
  if (v.kind == Kind.Null) return null;
  return readString(doc, path, v);
}

export function readBool(doc: Doc, path: string, v: Value): bool {
  if (v.kind == Kind.Bool) return v.bool;
  invalidType(doc, path, v, "a boolean");
  return false;
}

/** An unsigned integer of at most `max`, `what` being serde's name for its type (`u32`). */
export function readUnsigned(doc: Doc, path: string, v: Value, max: i64, what: string): i64 {
  if (v.kind != Kind.Number || !v.isInteger()) {
    invalidType(doc, path, v, what);
    return 0;
  }
  const n = v.magnitude();
  if (v.isNegative() || n < 0 || n > max) {
    if (n == 0) return 0; // -0
    fail(doc, path, "invalid value: integer `" + v.num + "`, expected " + what);
    return 0;
  }
  return n;
}

export function readU32(doc: Doc, path: string, v: Value): i64 {
  return readUnsigned(doc, path, v, 0xffffffff, "u32");
}

/** An `Option<u32>`: -1 when absent or null. */
export function readOptU32(doc: Doc, path: string, v: Value): i64 {
  if (v.kind == Kind.Null) return -1;
  return readU32(doc, path, v);
}

export function readU16(doc: Doc, path: string, v: Value): i64 {
  return readUnsigned(doc, path, v, 0xffff, "u16");
}

/** A TCP port, 1 to 65535. */
export function readPort(doc: Doc, path: string, v: Value): i64 {
  const what = "a port number from 1 to 65535";
  if (v.kind != Kind.Number || !v.isInteger()) {
    invalidType(doc, path, v, what);
    return 0;
  }
  const n = v.magnitude();
  if ((v.isNegative() && n != 0) || n <= 0 || n > 65535) {
    fail(doc, path, "invalid value: integer `" + v.num + "`, expected " + what);
    return 0;
  }
  return n;
}

/** A duration string (`250ms`); null when absent or null. */
export function readOptDur(doc: Doc, path: string, v: Value): Dur | null {
  if (v.kind == Kind.Null) return null;
  return readDur(doc, path, v);
}

export function readDur(doc: Doc, path: string, v: Value): Dur | null {
  if (v.kind != Kind.String) {
    invalidType(doc, path, v, "a duration string such as 250ms, 1s or 1m30s");
    return null;
  }
  const d = parseDuration(v.str);
  if (d === null) {
    fail(doc, path, durationError);
    return null;
  }
  return d;
}

/** A unit enum written as its variant name; returns the variant's index. */
export function readEnum(doc: Doc, path: string, v: Value, name: string, variants: Array<string>): i32 {
  let variant: Value = v;
  if (v.kind == Kind.Object && v.items.length == 1) {
    // serde also reads `{variant: null}` as a unit variant.
    if (v.items[0].kind != Kind.Null) {
      invalidType(doc, path, v.items[0], "unit variant");
      return 0;
    }
    variant = Value.string(v.items[0].key);
  }
  if (variant.kind != Kind.String) {
    invalidType(doc, path, v, "enum " + name);
    return 0;
  }
  for (let i = 0; i < variants.length; i++) {
    if (variants[i] == variant.str) return i;
  }
  fail(doc, path, "unknown variant `" + variant.str + "`, " + oneOf(variants));
  return 0;
}

/** Checks that `v` is a list (`Vec<T>`); `#[serde(default)]` lists still refuse null. */
export function expectSeq(doc: Doc, path: string, v: Value): bool {
  if (v.kind == Kind.Array) return true;
  invalidType(doc, path, v, "a sequence");
  return false;
}

/** A `Vec<String>`. */
export function readStrings(doc: Doc, path: string, v: Value): Array<string> {
  const out = new Array<string>();
  if (!expectSeq(doc, path, v)) return out;
  for (let i = 0; i < v.items.length; i++) {
    out.push(readString(doc, path + "[" + i.toString() + "]", v.items[i]));
    if (failed()) break;
  }
  return out;
}

/** A `Vec<u16>`. */
export function readU16s(doc: Doc, path: string, v: Value): Array<i64> {
  const out = new Array<i64>();
  if (!expectSeq(doc, path, v)) return out;
  for (let i = 0; i < v.items.length; i++) {
    out.push(readU16(doc, path + "[" + i.toString() + "]", v.items[i]));
    if (failed()) break;
  }
  return out;
}

/** A `BTreeMap<String, String>`: keys in Rust's order (by code unit, the same for ASCII). */
export class StringMap {
  keys: Array<string> = [];
  values: Array<string> = [];
}

export function readStringMap(doc: Doc, path: string, v: Value): StringMap {
  const out = new StringMap();
  if (v.kind != Kind.Object) {
    invalidType(doc, path, v, "a map");
    return out;
  }
  const byKey = new Map<string, string>();
  for (let i = 0; i < v.items.length; i++) {
    const item = v.items[i];
    const value = readString(doc, path + "." + item.key, item);
    if (failed()) return out;
    byKey.set(item.key, value);
  }
  out.keys = sortStrings(byKey.keys());
  for (let i = 0; i < out.keys.length; i++) out.values.push(byKey.get(out.keys[i]));
  return out;
}
