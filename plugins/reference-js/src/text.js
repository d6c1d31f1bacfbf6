// String helpers that behave like the Rust reference's: `{:?}` quoting, code point order (the
// order of a Rust BTreeMap<String, _>), UTF-8 length.

/** A string quoted and escaped as Rust's `{:?}` shows it: `"a\"b"`. */
export function debug(s) {
  let out = '"';
  for (const c of s) {
    const escaped = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0" }[c];
    if (escaped) out += escaped;
    else if (/\p{Cc}/u.test(c)) {
      out += `\\u{${c.codePointAt(0).toString(16)}}`;
    } else out += c;
  }
  return out + '"';
}

/** Orders strings by code point, as Rust orders `String`s (JS's `<` orders UTF-16 units). */
export function compareStrings(a, b) {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** The length of `s` in UTF-8 bytes (Rust's `str::len`). */
export function utf8Length(s) {
  let n = 0;
  for (const c of s) {
    const cp = c.codePointAt(0);
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return n;
}

/** ASCII-only lowercasing (Rust's `to_ascii_lowercase`). */
export function asciiLowercase(s) {
  return s.replace(/[A-Z]/g, (c) => c.toLowerCase());
}
