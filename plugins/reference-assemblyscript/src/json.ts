// JSON values, a parser and a writer: what crosses the core-module ABI (proto/core-abi).
//
// Objects keep their keys in input order, numbers keep their source text (so a u64 or a float
// is read exactly as written). AssemblyScript strings are UTF-16; the ABI's bytes are UTF-8:
// the request is decoded once into a string for the `Parser`, and the `Writer` encodes UTF-8
// as it writes.

export const enum Kind {
  Null,
  Bool,
  Number,
  String,
  Array,
  Object,
}

// Scalars share this (never written to), so a scalar costs one allocation.
const NO_VALUES: Array<Value> = [];

export class Value {
  kind: Kind = Kind.Null;
  bool: bool = false;
  /** The number's text as written (`8080`, `-1`, `1.5e3`). */
  num: string = "";
  str: string = "";
  /** An array's items, or an object's values in order (each carrying its `key`). */
  items: Array<Value> = NO_VALUES;
  /** The key of an object's value ("" for the rest). */
  key: string = "";

  static null(): Value {
    return new Value();
  }

  static boolean(b: bool): Value {
    const v = new Value();
    v.kind = Kind.Bool;
    v.bool = b;
    return v;
  }

  static number(text: string): Value {
    const v = new Value();
    v.kind = Kind.Number;
    v.num = text;
    return v;
  }

  static integer(n: i64): Value {
    return Value.number(n.toString());
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
    v.items = [];
    return v;
  }

  static object(): Value {
    const v = new Value();
    v.kind = Kind.Object;
    v.items = [];
    return v;
  }

  /** Appends to an array; returns this array. */
  push(item: Value): Value {
    this.items.push(item);
    return this;
  }

  /**
   * Sets an object's key (appending it: keys are not checked for duplicates); returns this
   * object. `value` takes the key, so it must not be in another object too.
   */
  set(key: string, value: Value): Value {
    value.key = key;
    this.items.push(value);
    return this;
  }

  setString(key: string, s: string): Value {
    return this.set(key, Value.string(s));
  }

  setInteger(key: string, n: i64): Value {
    return this.set(key, Value.integer(n));
  }

  setBool(key: string, b: bool): Value {
    return this.set(key, Value.boolean(b));
  }

  /** The value under `key` of an object, or null when absent (or not an object). */
  get(key: string): Value | null {
    if (this.kind != Kind.Object) return null;
    const items = this.items;
    for (let i = 0; i < items.length; i++) {
      if (items[i].key == key) return items[i];
    }
    return null;
  }

  /** Whether this is a number written as an integer (no fraction, no exponent). */
  isInteger(): bool {
    if (this.kind != Kind.Number) return false;
    const s = this.num;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c == 0x2e || c == 0x65 || c == 0x45) return false; // . e E
    }
    return true;
  }

  isNegative(): bool {
    return this.kind == Kind.Number && this.num.startsWith("-");
  }

  /**
   * An integer's magnitude, or -1 when it does not fit in an i64 (callers compare against the
   * ranges they accept, all far below that).
   */
  magnitude(): i64 {
    const s = this.num;
    let i = s.startsWith("-") ? 1 : 0;
    let n: i64 = 0;
    for (; i < s.length; i++) {
      const d = <i64>(s.charCodeAt(i) - 0x30);
      if (n > (i64.MAX_VALUE - d) / 10) return -1;
      n = n * 10 + d;
    }
    return n;
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing

const KEY_CACHE_SIZE = 256;
const keyCache: Array<string> = new Array<string>(KEY_CACHE_SIZE).fill("");

/** Where parsing failed, or "" when it did not. */
export let parseError: string = "";

/**
 * A JSON parser over a string: `value()` builds a tree, `skip()` steps over a value without
 * building anything (to stream a large request one document at a time).
 */
export class Parser {
  s: string;
  i: i32 = 0;
  depth: i32 = 0;

  constructor(s: string) {
    this.s = s;
  }

  fail(what: string): Value {
    if (parseError.length == 0) parseError = what + " at character " + this.i.toString();
    return Value.null();
  }

  /** Like `fail`, for functions that answer whether they succeeded. */
  error(what: string): bool {
    this.fail(what);
    return false;
  }

  ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) this.i++;
      else break;
    }
  }

  value(): Value {
    this.ws();
    if (this.i >= this.s.length) return this.fail("unexpected end of JSON");
    const c = this.s.charCodeAt(this.i);
    if (c == 0x7b) return this.object();
    if (c == 0x5b) return this.array();
    if (c == 0x22) {
      const str = this.string();
      return parseError.length ? Value.null() : Value.string(str);
    }
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    if (this.s.startsWith("true", this.i)) {
      this.i += 4;
      return Value.boolean(true);
    }
    if (this.s.startsWith("false", this.i)) {
      this.i += 5;
      return Value.boolean(false);
    }
    if (this.s.startsWith("null", this.i)) {
      this.i += 4;
      return Value.null();
    }
    return this.fail("unexpected character");
  }

  object(): Value {
    if (++this.depth > 512) return this.fail("nested too deeply");
    const v = Value.object();
    this.i++; // {
    this.ws();
    if (this.i < this.s.length && this.s.charCodeAt(this.i) == 0x7d) {
      this.i++;
      this.depth--;
      return v;
    }
    while (true) {
      this.ws();
      if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 0x22) return this.fail("expected a key");
      const key = this.key();
      if (parseError.length) return v;
      this.ws();
      if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 0x3a) return this.fail("expected ':'");
      this.i++;
      const item = this.value();
      if (parseError.length) return v;
      v.set(key, item);
      this.ws();
      if (this.i >= this.s.length) return this.fail("unterminated object");
      const c = this.s.charCodeAt(this.i++);
      if (c == 0x7d) break;
      if (c != 0x2c) return this.fail("expected ',' or '}'");
    }
    this.depth--;
    return v;
  }

  array(): Value {
    if (++this.depth > 512) return this.fail("nested too deeply");
    const v = Value.array();
    this.i++; // [
    this.ws();
    if (this.i < this.s.length && this.s.charCodeAt(this.i) == 0x5d) {
      this.i++;
      this.depth--;
      return v;
    }
    while (true) {
      const item = this.value();
      if (parseError.length) return v;
      v.push(item);
      this.ws();
      if (this.i >= this.s.length) return this.fail("unterminated array");
      const c = this.s.charCodeAt(this.i++);
      if (c == 0x5d) break;
      if (c != 0x2c) return this.fail("expected ',' or ']'");
    }
    this.depth--;
    return v;
  }

  number(): Value {
    const start = this.i;
    const s = this.s;
    if (s.charCodeAt(this.i) == 0x2d) this.i++;
    let digits = 0;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if ((c >= 0x30 && c <= 0x39) || c == 0x2e || c == 0x65 || c == 0x45 || c == 0x2b || c == 0x2d) {
        if (c >= 0x30 && c <= 0x39) digits++;
        this.i++;
      } else break;
    }
    if (digits == 0) return this.fail("malformed number");
    return Value.number(s.substring(start, this.i));
  }

  /** Steps over one value, checking only that it is well formed. Returns false on error. */
  skip(): bool {
    this.ws();
    const s = this.s;
    if (this.i >= s.length) {
      this.fail("unexpected end of JSON");
      return false;
    }
    const c = s.charCodeAt(this.i);
    if (c == 0x22) {
      this.i++;
      while (this.i < s.length) {
        const d = s.charCodeAt(this.i++);
        if (d == 0x22) return true;
        if (d == 0x5c) this.i++;
      }
      this.fail("unterminated string");
      return false;
    }
    if (c == 0x7b || c == 0x5b) {
      const close = c == 0x7b ? 0x7d : 0x5d;
      this.i++;
      this.ws();
      if (this.i < s.length && s.charCodeAt(this.i) == close) {
        this.i++;
        return true;
      }
      while (true) {
        if (c == 0x7b) {
          this.ws();
          if (this.i >= s.length || s.charCodeAt(this.i) != 0x22 || !this.skip()) return this.error("expected a key");
          this.ws();
          if (this.i >= s.length || s.charCodeAt(this.i) != 0x3a) return this.error("expected ':'");
          this.i++;
        }
        if (!this.skip()) return false;
        this.ws();
        if (this.i >= s.length) return this.error("unterminated value");
        const d = s.charCodeAt(this.i++);
        if (d == close) return true;
        if (d != 0x2c) return this.error("expected ','");
      }
    }
    this.value();
    return parseError.length == 0;
  }

  /** Whether the next non-space character is `c`; consumes it if so. */
  eat(c: i32): bool {
    this.ws();
    if (this.i < this.s.length && this.s.charCodeAt(this.i) == c) {
      this.i++;
      return true;
    }
    return false;
  }

  hex4(): i32 {
    if (this.i + 4 > this.s.length) return -1;
    let n = 0;
    for (let k = 0; k < 4; k++) {
      const c = this.s.charCodeAt(this.i++);
      let d: i32;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      else return -1;
      n = (n << 4) | d;
    }
    return n;
  }

  /**
   * An object key. Keys repeat (every endpoint has an `address`), so plain ones are shared
   * through a small cache instead of allocating a string each time.
   */
  key(): string {
    const s = this.s;
    const start = this.i + 1;
    let h: u32 = 0;
    let end = start;
    while (end < s.length) {
      const c = s.charCodeAt(end);
      if (c == 0x22) break;
      if (c == 0x5c) return this.string();
      h = h * 31 + <u32>c;
      end++;
    }
    if (end >= s.length) return this.string();
    const slot = <i32>(h & (KEY_CACHE_SIZE - 1));
    const cached = unchecked(keyCache[slot]);
    this.i = end + 1;
    if (cached.length == end - start) {
      let same = true;
      for (let k = 0; k < cached.length; k++) {
        if (cached.charCodeAt(k) != s.charCodeAt(start + k)) {
          same = false;
          break;
        }
      }
      if (same) return cached;
    }
    const key = s.substring(start, end);
    unchecked((keyCache[slot] = key));
    return key;
  }

  string(): string {
    const s = this.s;
    this.i++; // "
    let start = this.i;
    let parts: Array<string> | null = null;
    while (true) {
      if (this.i >= s.length) {
        this.fail("unterminated string");
        return "";
      }
      const c = s.charCodeAt(this.i);
      if (c == 0x22) break;
      if (c != 0x5c) {
        this.i++;
        continue;
      }
      if (parts === null) parts = [];
      parts.push(s.substring(start, this.i));
      this.i++;
      if (this.i >= s.length) {
        this.fail("unterminated string");
        return "";
      }
      const e = s.charCodeAt(this.i++);
      if (e == 0x22) parts.push('"');
      else if (e == 0x5c) parts.push("\\");
      else if (e == 0x2f) parts.push("/");
      else if (e == 0x62) parts.push("\b");
      else if (e == 0x66) parts.push("\f");
      else if (e == 0x6e) parts.push("\n");
      else if (e == 0x72) parts.push("\r");
      else if (e == 0x74) parts.push("\t");
      else if (e == 0x75) {
        const u = this.hex4();
        if (u < 0) {
          this.fail("bad \\u escape");
          return "";
        }
        parts.push(String.fromCharCode(u));
      } else {
        this.fail("bad escape");
        return "";
      }
      start = this.i;
    }
    let out: string;
    if (parts === null) out = s.substring(start, this.i);
    else {
      parts.push(s.substring(start, this.i));
      out = parts.join("");
    }
    this.i++; // "
    return out;
  }
}

/** Forgets a previous parse error. */
export function clearParseError(): void {
  parseError = "";
}

/** Parses JSON text; on failure returns null and sets `parseError`. */
export function parse(text: string): Value | null {
  parseError = "";
  const p = new Parser(text);
  const v = p.value();
  p.ws();
  if (parseError.length == 0 && p.i < text.length) p.fail("trailing characters");
  return parseError.length ? null : v;
}

// ---------------------------------------------------------------------------------------------
// Writing: straight to UTF-8 bytes in one growing buffer.

const HEX = "0123456789abcdef";

/** Writes JSON as UTF-8 into one growing buffer. */
export class Writer {
  buf: Uint8Array = new Uint8Array(1024);
  len: i32 = 0;

  reserve(n: i32): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const bigger = new Uint8Array(size);
    memory.copy(bigger.dataStart, this.buf.dataStart, <usize>this.len);
    this.buf = bigger;
  }

  byte(b: i32): void {
    this.reserve(1);
    unchecked((this.buf[this.len++] = <u8>b));
  }

  ascii(s: string): void {
    this.reserve(s.length);
    for (let i = 0; i < s.length; i++) unchecked((this.buf[this.len++] = <u8>s.charCodeAt(i)));
  }

  /** A JSON string literal, UTF-8 encoded. */
  quoted(s: string): void {
    this.reserve(s.length * 3 + 2);
    let buf = this.buf;
    let n = this.len;
    unchecked((buf[n++] = 0x22));
    for (let i = 0; i < s.length; i++) {
      let c = <i32>s.charCodeAt(i);
      if (c < 0x80) {
        if (c >= 0x20 && c != 0x22 && c != 0x5c) {
          unchecked((buf[n++] = <u8>c));
          continue;
        }
        this.len = n;
        if (c == 0x22) this.ascii('\\"');
        else if (c == 0x5c) this.ascii("\\\\");
        else if (c == 0x0a) this.ascii("\\n");
        else if (c == 0x0d) this.ascii("\\r");
        else if (c == 0x09) this.ascii("\\t");
        else this.ascii("\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15));
        this.reserve((s.length - i) * 3 + 1);
        buf = this.buf;
        n = this.len;
        continue;
      }
      if (c < 0x800) {
        unchecked((buf[n++] = <u8>(0xc0 | (c >> 6))));
        unchecked((buf[n++] = <u8>(0x80 | (c & 63))));
        continue;
      }
      if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
        const d = <i32>s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
          unchecked((buf[n++] = <u8>(0xf0 | (c >> 18))));
          unchecked((buf[n++] = <u8>(0x80 | ((c >> 12) & 63))));
          unchecked((buf[n++] = <u8>(0x80 | ((c >> 6) & 63))));
          unchecked((buf[n++] = <u8>(0x80 | (c & 63))));
          continue;
        }
      }
      // (a lone surrogate is written as U+FFFD)
      if (c >= 0xd800 && c < 0xe000) c = 0xfffd;
      unchecked((buf[n++] = <u8>(0xe0 | (c >> 12))));
      unchecked((buf[n++] = <u8>(0x80 | ((c >> 6) & 63))));
      unchecked((buf[n++] = <u8>(0x80 | (c & 63))));
    }
    this.len = n;
    this.byte(0x22);
  }

  /** The bytes written so far, in a buffer of their own. */
  bytes(): ArrayBuffer {
    return this.buf.buffer.slice(0, this.len);
  }

  value(v: Value): void {
    switch (v.kind) {
      case Kind.Null:
        this.ascii("null");
        break;
      case Kind.Bool:
        this.ascii(v.bool ? "true" : "false");
        break;
      case Kind.Number:
        this.ascii(v.num);
        break;
      case Kind.String:
        this.quoted(v.str);
        break;
      case Kind.Array:
        this.byte(0x5b);
        for (let i = 0; i < v.items.length; i++) {
          if (i > 0) this.byte(0x2c);
          this.value(unchecked(v.items[i]));
        }
        this.byte(0x5d);
        break;
      default:
        this.byte(0x7b);
        for (let i = 0; i < v.items.length; i++) {
          if (i > 0) this.byte(0x2c);
          const item = unchecked(v.items[i]);
          this.quoted(item.key);
          this.byte(0x3a);
          this.value(item);
        }
        this.byte(0x7d);
    }
  }
}
