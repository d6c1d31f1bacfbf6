// String helpers with Rust's semantics where the reference's messages or checks depend on
// them: `{:?}` quoting, `char::is_whitespace`, `str::trim`, ASCII case folding.

const HEX = "0123456789abcdef";

/** `"text"` with quotes, backslashes and control characters escaped, like Rust's `{:?}`. */
export function quote(s: string): string {
  const out = new Array<string>();
  out.push('"');
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) out.push('\\"');
    else if (c == 0x5c) out.push("\\\\");
    else if (c == 0x0a) out.push("\\n");
    else if (c == 0x0d) out.push("\\r");
    else if (c == 0x09) out.push("\\t");
    else if (c == 0) out.push("\\0");
    else if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
      let h = "";
      let n = c;
      do {
        h = HEX.charAt(n & 15) + h;
        n >>= 4;
      } while (n > 0);
      out.push("\\u{" + h + "}");
    } else out.push(String.fromCharCode(c));
  }
  out.push('"');
  return out.join("");
}

/** Rust's `char::is_whitespace` (the Unicode White_Space property) for a UTF-16 code unit. */
export function isWhitespace(c: i32): bool {
  if (c >= 0x09 && c <= 0x0d) return true;
  if (c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680) return true;
  if (c >= 0x2000 && c <= 0x200a) return true;
  return c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/** Rust's `char::is_control` (category Cc). */
export function isControl(c: i32): bool {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f);
}

/** Rust's `str::trim`. */
export function trim(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && isWhitespace(s.charCodeAt(a))) a++;
  while (b > a && isWhitespace(s.charCodeAt(b - 1))) b--;
  return a == 0 && b == s.length ? s : s.substring(a, b);
}

/** Rust's `str::to_ascii_lowercase`. */
export function asciiLower(s: string): string {
  let lower = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) {
      lower = false;
      break;
    }
  }
  if (lower) return s;
  const out = new Array<string>();
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out.push(String.fromCharCode(c >= 0x41 && c <= 0x5a ? c + 32 : c));
  }
  return out.join("");
}

export function isAsciiDigit(c: i32): bool {
  return c >= 0x30 && c <= 0x39;
}

export function isAsciiAlphanumeric(c: i32): bool {
  return isAsciiDigit(c) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

/** serde's list of alternatives: "`a`", "`a` or `b`", "one of `a`, `b`, `c`". */
export function oneOf(names: Array<string>): string {
  if (names.length == 0) return "there are no fields";
  if (names.length == 1) return "expected `" + names[0] + "`";
  if (names.length == 2) return "expected `" + names[0] + "` or `" + names[1] + "`";
  return "expected one of `" + names.join("`, `") + "`";
}

/** Whether `names` holds `s`. */
export function contains(names: Array<string>, s: string): bool {
  for (let i = 0; i < names.length; i++) if (names[i] == s) return true;
  return false;
}

/** Sorts strings by code unit, which for these keys is Rust's byte order. */
export function sortStrings(a: Array<string>): Array<string> {
  const out = a.slice(0);
  out.sort((x: string, y: string): i32 => (x < y ? -1 : x > y ? 1 : 0));
  return out;
}
