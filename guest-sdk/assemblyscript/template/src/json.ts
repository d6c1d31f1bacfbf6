// A small JSON library: parse text into `Value` trees, build trees, write them as UTF-8.
// Object keys keep their order; numbers keep their text (`8080`, `1.5`), so integers of any
// size are read exactly.

export const enum Kind {
  Null,
  Bool,
  Number,
  String,
  Array,
  Object,
}

export class Value {
  kind: Kind = Kind.Null;
  bool: bool = false;
  /** A number's text as written. */
  num: string = "";
  str: string = "";
  /** An array's items, or an object's values (each with its `key`), in order. */
  items: Array<Value> = [];
  /** The key of an object's value. */
  key: string = "";

  static null(): Value {
    return new Value();
  }

  static bool(b: bool): Value {
    const v = new Value();
    v.kind = Kind.Bool;
    v.bool = b;
    return v;
  }

  static integer(n: i64): Value {
    const v = new Value();
    v.kind = Kind.Number;
    v.num = n.toString();
    return v;
  }

  static string(s: string): Value {
    const v = new Value();
    v.kind = Kind.String;
    v.str = s;
    return v;
  }

  static array(): Value {
    const v = new Value();
    v.kind = Kind.Array;
    return v;
  }

  static object(): Value {
    const v = new Value();
    v.kind = Kind.Object;
    return v;
  }

  /** Appends to an array; returns the array. */
  push(item: Value): Value {
    this.items.push(item);
    return this;
  }

  /** Adds `key` to an object (`value` must not be in another object); returns the object. */
  set(key: string, value: Value): Value {
    value.key = key;
    this.items.push(value);
    return this;
  }

  /** An object's value for `key`, or null. */
  get(key: string): Value | null {
    if (this.kind != Kind.Object) return null;
    for (let i = 0; i < this.items.length; i++) {
      if (this.items[i].key == key) return this.items[i];
    }
    return null;
  }

  isString(): bool {
    return this.kind == Kind.String;
  }

  /** An integer number's value, or `fallback` if this is not one (or it is out of i64 range). */
  asInteger(fallback: i64): i64 {
    if (this.kind != Kind.Number) return fallback;
    const s = this.num;
    const negative = s.startsWith("-");
    let n: i64 = 0;
    for (let i = negative ? 1 : 0; i < s.length; i++) {
      const d = s.charCodeAt(i) - 0x30;
      if (d < 0 || d > 9 || n > (i64.MAX_VALUE - d) / 10) return fallback;
      n = n * 10 + d;
    }
    return negative ? -n : n;
  }
}

// --- parsing ---------------------------------------------------------------------------------

/** Why the last `parse` failed. */
export let parseError = "";

class Parser {
  i: i32 = 0;
  constructor(public s: string) {}

  fail(what: string): Value {
    if (parseError.length == 0) parseError = what + " at character " + this.i.toString();
    return Value.null();
  }

  ws(): void {
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }

  peek(): i32 {
    this.ws();
    return this.i < this.s.length ? this.s.charCodeAt(this.i) : -1;
  }

  value(): Value {
    const c = this.peek();
    if (c == 0x7b) return this.container(Value.object(), 0x7d);
    if (c == 0x5b) return this.container(Value.array(), 0x5d);
    if (c == 0x22) return Value.string(this.string());
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = this.i;
      while (this.i < this.s.length && "+-.0123456789eE".includes(this.s.charAt(this.i))) this.i++;
      const v = new Value();
      v.kind = Kind.Number;
      v.num = this.s.substring(start, this.i);
      return v;
    }
    for (let k = 0; k < 3; k++) {
      const word = ["true", "false", "null"][k];
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return k == 2 ? Value.null() : Value.bool(k == 0);
      }
    }
    return this.fail("unexpected character");
  }

  container(v: Value, close: i32): Value {
    this.i++;
    if (this.peek() == close) {
      this.i++;
      return v;
    }
    while (parseError.length == 0) {
      if (v.kind == Kind.Object) {
        if (this.peek() != 0x22) return this.fail("expected a key");
        const key = this.string();
        if (this.peek() != 0x3a) return this.fail("expected ':'");
        this.i++;
        v.set(key, this.value());
      } else v.push(this.value());
      const c = this.peek();
      this.i++;
      if (c == close) return v;
      if (c != 0x2c) return this.fail("expected ',' or a closing bracket");
    }
    return v;
  }

  string(): string {
    const s = this.s;
    const parts = new Array<string>();
    let start = ++this.i;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c == 0x22) {
        parts.push(s.substring(start, this.i++));
        return parts.join("");
      }
      if (c != 0x5c) {
        this.i++;
        continue;
      }
      parts.push(s.substring(start, this.i));
      const e = s.charAt(this.i + 1);
      this.i += 2;
      if (e == "u") {
        parts.push(String.fromCharCode(<i32>parseInt(s.substr(this.i, 4), 16)));
        this.i += 4;
      } else {
        const at = "\"\\/bfnrt".indexOf(e);
        if (at < 0) {
          this.fail("bad escape");
          return "";
        }
        parts.push("\"\\/\b\f\n\r\t".charAt(at));
      }
      start = this.i;
    }
    this.fail("unterminated string");
    return "";
  }
}

/** Parses UTF-8 JSON at `ptr`; null (and `parseError` set) if it is not valid. */
export function parseUtf8(ptr: usize, len: usize): Value | null {
  parseError = "";
  const p = new Parser(String.UTF8.decodeUnsafe(ptr, len));
  const v = p.value();
  if (parseError.length == 0 && p.peek() != -1) p.fail("trailing characters");
  return parseError.length ? null : v;
}

// --- writing ---------------------------------------------------------------------------------

function quote(s: string, out: Array<string>): void {
  out.push('"');
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c != 0x22 && c != 0x5c) continue;
    out.push(s.substring(start, i));
    out.push(c == 0x22 ? '\\"' : c == 0x5c ? "\\\\" : "\\u" + c.toString(16).padStart(4, "0"));
    start = i + 1;
  }
  out.push(s.substring(start));
  out.push('"');
}

function write(v: Value, out: Array<string>): void {
  if (v.kind == Kind.Null) out.push("null");
  else if (v.kind == Kind.Bool) out.push(v.bool ? "true" : "false");
  else if (v.kind == Kind.Number) out.push(v.num);
  else if (v.kind == Kind.String) quote(v.str, out);
  else {
    const object = v.kind == Kind.Object;
    out.push(object ? "{" : "[");
    for (let i = 0; i < v.items.length; i++) {
      if (i > 0) out.push(",");
      if (object) {
        quote(v.items[i].key, out);
        out.push(":");
      }
      write(v.items[i], out);
    }
    out.push(object ? "}" : "]");
  }
}

/** `v` as UTF-8 JSON. */
export function toUtf8(v: Value): ArrayBuffer {
  const out = new Array<string>();
  write(v, out);
  return String.UTF8.encode(out.join(""));
}
