// Reading JSON while keeping what `JSON.parse` alone loses and the Rust reference relies on:
// whether a number was written as an integer or a float, integers beyond 2^53 exactly, and
// object keys in the order written (JS objects list integer-like keys first) and repeated.
// JSON.parse is used when it loses none of these (see parseJson), a reader written here
// otherwise. Values become tagged nodes:
//   {t: "null"} {t: "bool", v} {t: "str", v} {t: "int", v: BigInt} {t: "float", v: Number}
//   {t: "seq", v: [node]} {t: "map", v: [[key, node]]}
// Integers follow serde_json: beyond u64 (or i64 when negative), and `-0`, they are floats.

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const NUMBER = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

export class JsonError extends Error {}

/** Parses `text`; throws a JsonError saying where the JSON is malformed. */
export function parseJson(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return readJson(text); // which says where the JSON is malformed
  }
  // The engine's JSON.parse (native code, several times faster than the reader below) read the
  // text exactly if writing the value back gives the same text, and every number is an integer
  // below 2^53: then no number was a float, no key moved (JS objects list integer-like keys
  // first) and none was repeated. xdst writes documents as compact JSON, so this is the rule.
  if (JSON.stringify(value) === text) {
    try {
      return toNode(value);
    } catch (e) {
      if (!(e instanceof Inexact)) throw e;
    }
  }
  return readJson(text);
}

class Inexact extends Error {}

function toNode(x) {
  if (x === null) return { t: "null" };
  if (typeof x === "boolean") return { t: "bool", v: x };
  if (typeof x === "string") return { t: "str", v: x };
  if (typeof x === "number") {
    if (!Number.isSafeInteger(x)) throw new Inexact();
    return { t: "int", v: BigInt(x) };
  }
  if (Array.isArray(x)) return { t: "seq", v: x.map(toNode) };
  return { t: "map", v: Object.keys(x).map((k) => [k, toNode(x[k])]) };
}

function readJson(text) {
  const reader = new Reader(text);
  reader.space();
  const value = reader.value();
  reader.space();
  if (reader.i < text.length) reader.fail("trailing characters");
  return value;
}

/** The node of the last `key` entry of a map node, or undefined. */
export function field(node, key) {
  let found;
  for (const [k, v] of node.v) if (k === key) found = v;
  return found;
}

class Reader {
  constructor(text) {
    this.s = text;
    this.i = 0;
  }

  fail(what) {
    throw new JsonError(`malformed JSON: ${what} at offset ${this.i}`);
  }

  space() {
    while (this.i < this.s.length && " \t\n\r".includes(this.s[this.i])) this.i++;
  }

  value() {
    const c = this.s[this.i];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return { t: "str", v: this.string() };
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    for (const [word, node] of [["null", { t: "null" }], ["true", { t: "bool", v: true }], ["false", { t: "bool", v: false }]]) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return node;
      }
    }
    return this.fail("expected value");
  }

  object() {
    const entries = [];
    this.i++;
    this.space();
    if (this.s[this.i] === "}") {
      this.i++;
      return { t: "map", v: entries };
    }
    for (;;) {
      this.space();
      if (this.s[this.i] !== '"') this.fail("expected a string key");
      const key = this.string();
      this.space();
      if (this.s[this.i] !== ":") this.fail("expected ':'");
      this.i++;
      this.space();
      entries.push([key, this.value()]);
      this.space();
      const c = this.s[this.i++];
      if (c === "}") return { t: "map", v: entries };
      if (c !== ",") this.fail("expected ',' or '}'");
    }
  }

  array() {
    const items = [];
    this.i++;
    this.space();
    if (this.s[this.i] === "]") {
      this.i++;
      return { t: "seq", v: items };
    }
    for (;;) {
      this.space();
      items.push(this.value());
      this.space();
      const c = this.s[this.i++];
      if (c === "]") return { t: "seq", v: items };
      if (c !== ",") this.fail("expected ',' or ']'");
    }
  }

  string() {
    let out = "";
    let start = ++this.i;
    for (;;) {
      if (this.i >= this.s.length) this.fail("unterminated string");
      const c = this.s[this.i];
      if (c === '"') {
        out += this.s.slice(start, this.i++);
        return out;
      }
      if (c < " ") this.fail("control character in string");
      if (c !== "\\") {
        this.i++;
        continue;
      }
      out += this.s.slice(start, this.i);
      out += this.escape();
      start = this.i;
    }
  }

  escape() {
    const c = this.s[this.i + 1];
    this.i += 2;
    const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
    if (c in simple) return simple[c];
    if (c !== "u") return this.fail("invalid escape");
    const hex = this.s.slice(this.i, this.i + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("invalid \\u escape");
    this.i += 4;
    return String.fromCharCode(parseInt(hex, 16));
  }

  number() {
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.s);
    if (!m) return this.fail("invalid number");
    const text = m[0];
    this.i += text.length;
    if (m[2] === undefined && m[3] === undefined) {
      const n = BigInt(text);
      const negativeZero = text.startsWith("-") && n === 0n;
      if (n <= U64_MAX && n >= I64_MIN && !negativeZero) return { t: "int", v: n };
    }
    return { t: "float", v: Number(text) };
  }
}
