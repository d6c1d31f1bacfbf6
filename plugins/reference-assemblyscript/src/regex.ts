// Regex syntax checking: the rules of the `regex-syntax` AST parser the Rust reference uses
// (RE2 syntax; no look-around, no back-references). It only decides whether a pattern parses,
// and why not, in regex-syntax's words; it builds nothing.

import { isWhitespace } from "./text";

const NEST_LIMIT = 250;

/** What a concatenation's last item is, for repetition operators. */
const enum Item {
  Atom,
  Flags,
}

class RegexParser {
  cps: Array<i32>;
  pos: i32 = 0;
  /** The `x` flag: whitespace and `#` comments are ignored. */
  x: bool = false;
  names: Array<string> = [];
  error: string = "";
  /** The value of the last literal `primitive` read, for range checks. */
  lit: i32 = 0;

  constructor(pattern: string) {
    const cps = new Array<i32>();
    for (let i = 0; i < pattern.length; i++) {
      const c = pattern.charCodeAt(i);
      if (c >= 0xd800 && c < 0xdc00 && i + 1 < pattern.length) {
        const d = pattern.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) {
          cps.push(0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00));
          i++;
          continue;
        }
      }
      cps.push(c);
    }
    this.cps = cps;
  }

  eof(): bool {
    return this.pos >= this.cps.length;
  }

  char(): i32 {
    return this.pos < this.cps.length ? this.cps[this.pos] : -1;
  }

  peek(): i32 {
    return this.pos + 1 < this.cps.length ? this.cps[this.pos + 1] : -1;
  }

  bump(): bool {
    if (this.eof()) return false;
    this.pos++;
    return !this.eof();
  }

  bumpSpace(): void {
    if (!this.x) return;
    while (!this.eof()) {
      const c = this.char();
      if (isWhitespace(c)) this.pos++;
      else if (c == 0x23) {
        // `#` comment up to the end of the line
        while (!this.eof()) {
          const d = this.char();
          this.pos++;
          if (d == 0x0a) break;
        }
      } else break;
    }
  }

  bumpAndSpace(): bool {
    if (!this.bump()) return false;
    this.bumpSpace();
    return !this.eof();
  }

  bumpIf(s: string): bool {
    for (let i = 0; i < s.length; i++) {
      if (this.pos + i >= this.cps.length || this.cps[this.pos + i] != s.charCodeAt(i)) return false;
    }
    this.pos += s.length;
    return true;
  }

  fail(message: string): i32 {
    if (this.error.length == 0) this.error = message;
    return -1;
  }

  /** An alternation up to `)` or the end; returns its nesting depth, or -1 on error. */
  alternation(): i32 {
    let depth = 0;
    let count = 0;
    while (true) {
      const d = this.concat();
      if (d < 0) return -1;
      if (d > depth) depth = d;
      count++;
      if (this.char() == 0x7c) {
        this.pos++;
        continue;
      }
      break;
    }
    return count > 1 ? depth + 1 : depth;
  }

  concat(): i32 {
    const kinds = new Array<Item>();
    const depths = new Array<i32>();
    while (true) {
      this.bumpSpace();
      if (this.eof()) break;
      const c = this.char();
      if (c == 0x29 || c == 0x7c) break; // ) |
      if (c == 0x28) {
        // (
        const d = this.group();
        if (d < 0) return -1;
        if (d == 0x7fffffff) {
          kinds.push(Item.Flags);
          depths.push(0);
        } else {
          kinds.push(Item.Atom);
          depths.push(d);
        }
      } else if (c == 0x5b) {
        const d = this.classBracketed();
        if (d < 0) return -1;
        kinds.push(Item.Atom);
        depths.push(d);
      } else if (c == 0x3f || c == 0x2a || c == 0x2b) {
        // ? * +
        if (kinds.length == 0 || kinds[kinds.length - 1] == Item.Flags) {
          return this.fail("repetition operator missing expression");
        }
        depths[depths.length - 1]++;
        if (this.bump() && this.char() == 0x3f) this.bump();
      } else if (c == 0x7b) {
        // {
        if (kinds.length == 0 || kinds[kinds.length - 1] == Item.Flags) {
          return this.fail("repetition operator missing expression");
        }
        if (this.counted() < 0) return -1;
        depths[depths.length - 1]++;
      } else {
        if (this.primitive(false) < 0) return -1;
        kinds.push(Item.Atom);
        depths.push(0);
      }
    }
    let depth = 0;
    for (let i = 0; i < depths.length; i++) if (depths[i] > depth) depth = depths[i];
    return depths.length > 1 ? depth + 1 : depth;
  }

  /** `{n}`, `{n,}`, `{n,m}`, optionally lazy. */
  counted(): i32 {
    if (!this.bumpAndSpace()) return this.fail("unclosed counted repetition");
    const min = this.decimal();
    if (min == -2) return this.fail("repetition quantifier expects a valid decimal");
    if (min < 0) return -1;
    let max = min;
    if (this.eof()) return this.fail("unclosed counted repetition");
    if (this.char() == 0x2c) {
      if (!this.bumpAndSpace()) return this.fail("unclosed counted repetition");
      if (this.char() != 0x7d) {
        max = this.decimal();
        if (max == -2) return this.fail("repetition quantifier expects a valid decimal");
        if (max < 0) return -1;
      } else max = 0xffffffff;
    }
    if (this.eof() || this.char() != 0x7d) return this.fail("unclosed counted repetition");
    if (this.bumpAndSpace() && this.char() == 0x3f) this.bumpAndSpace();
    if (min > max) return this.fail("invalid repetition count range, the start must be <= the end");
    return 0;
  }

  /** A decimal (whitespace around it skipped); -2 if empty, -1 if too large. */
  decimal(): i64 {
    while (!this.eof() && isWhitespace(this.char())) this.pos++;
    let n: i64 = 0;
    let count = 0;
    while (!this.eof() && this.char() >= 0x30 && this.char() <= 0x39) {
      n = n * 10 + <i64>(this.char() - 0x30);
      if (n > 0xffffffff) {
        this.fail("decimal literal invalid");
        return -1;
      }
      count++;
      this.pos++;
    }
    while (!this.eof() && isWhitespace(this.char())) this.pos++;
    return count == 0 ? -2 : n;
  }

  /** A group; returns its depth, 0x7fffffff for `(?flags)`, or -1. */
  group(): i32 {
    this.pos++; // (
    this.bumpSpace();
    if (this.bumpIf("?=") || this.bumpIf("?!") || this.bumpIf("?<=") || this.bumpIf("?<!")) {
      return this.fail("look-around, including look-ahead and look-behind, is not supported");
    }
    const outerX = this.x;
    if (this.bumpIf("?P<") || this.bumpIf("?<")) {
      if (this.captureName() < 0) return -1;
    } else if (this.bumpIf("?")) {
      if (this.eof()) return this.fail("unclosed group");
      const flags = this.flags();
      if (flags < 0) return -1;
      const end = this.char();
      this.pos++;
      if (end == 0x29) {
        // `(?flags)` sets flags for the rest of the enclosing group.
        if (flags == 0) return this.fail("repetition operator missing expression");
        return 0x7fffffff;
      }
    }
    const inner = this.alternation();
    this.x = outerX;
    if (inner < 0) return -1;
    if (this.char() != 0x29) return this.fail("unclosed group");
    this.pos++;
    return inner + 1;
  }

  captureName(): i32 {
    if (this.eof()) return this.fail("unclosed capture group name");
    const start = this.pos;
    while (this.char() != 0x3e) {
      const c = this.char();
      const first = this.pos == start;
      const letter = (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c >= 0x80;
      const ok = c == 0x5f || letter || (!first && ((c >= 0x30 && c <= 0x39) || c == 0x2e || c == 0x5b || c == 0x5d));
      if (!ok) return this.fail("invalid capture group character");
      if (!this.bump()) break;
    }
    if (this.eof()) return this.fail("unclosed capture group name");
    const name = codePoints(this.cps.slice(start, this.pos));
    this.pos++; // >
    if (name.length == 0) return this.fail("empty capture group name");
    for (let i = 0; i < this.names.length; i++) {
      if (this.names[i] == name) return this.fail("duplicate capture group name");
    }
    this.names.push(name);
    return 0;
  }

  /** Flags up to `:` or `)`; returns how many items, or -1. Applies `x` to the parser. */
  flags(): i32 {
    let items = 0;
    let negated = false;
    let lastWasNegation = false;
    const seen = new Array<i32>();
    let x = this.x;
    while (this.char() != 0x3a && this.char() != 0x29) {
      const c = this.char();
      if (c == 0x2d) {
        if (negated) return this.fail("flag negation operator repeated");
        negated = true;
        lastWasNegation = true;
      } else {
        lastWasNegation = false;
        // i m s U u R x
        if (c != 0x69 && c != 0x6d && c != 0x73 && c != 0x55 && c != 0x75 && c != 0x52 && c != 0x78) {
          return this.fail("unrecognized flag");
        }
        if (seen.includes(c)) return this.fail("duplicate flag");
        seen.push(c);
        if (c == 0x78) x = !negated;
      }
      items++;
      if (!this.bump()) return this.fail("expected flag but got end of regex");
    }
    if (lastWasNegation) return this.fail("dangling flag negation operator");
    this.x = x;
    return items;
  }

  /**
   * A literal, `.`, `^`, `$` or escape. In a class (`inClass`), returns 1 for a literal, 2 for
   * a class escape (`\d`, `\pL`); outside, 0; -1 on error.
   */
  primitive(inClass: bool): i32 {
    const c = this.char();
    if (c == 0x5c) return this.escape(inClass);
    this.lit = c;
    this.pos++;
    return inClass ? 1 : 0;
  }

  escape(inClass: bool): i32 {
    if (!this.bump()) return this.fail("incomplete escape sequence, reached end of pattern prematurely");
    const c = this.char();
    if (c >= 0x30 && c <= 0x39) return this.fail("backreferences are not supported");
    if (c == 0x78 || c == 0x75 || c == 0x55) {
      // x u U
      if (this.hex(c == 0x78 ? 2 : c == 0x75 ? 4 : 8) < 0) return -1;
      return inClass ? 1 : 0;
    }
    if (c == 0x70 || c == 0x50) {
      // p P
      if (!this.bumpAndSpace()) return this.fail("incomplete escape sequence, reached end of pattern prematurely");
      if (this.char() == 0x7b) {
        while (this.char() != 0x7d) {
          if (!this.bumpAndSpace()) return this.fail("incomplete escape sequence, reached end of pattern prematurely");
        }
      }
      this.pos++;
      return inClass ? 2 : 0;
    }
    if (c == 0x64 || c == 0x73 || c == 0x77 || c == 0x44 || c == 0x53 || c == 0x57) {
      this.pos++;
      return inClass ? 2 : 0;
    }
    this.pos++;
    this.lit = c;
    if (isMeta(c) || isEscapeable(c)) return inClass ? 1 : 0;
    // \a \f \t \n \r \v
    const special = c == 0x61 ? 7 : c == 0x66 ? 12 : c == 0x74 ? 9 : c == 0x6e ? 10 : c == 0x72 ? 13 : c == 0x76 ? 11 : -1;
    if (special >= 0) {
      this.lit = special;
      return inClass ? 1 : 0;
    }
    // A z B < >: assertions; b with an optional {start}, {end}, {start-half}, {end-half}
    if (c == 0x41 || c == 0x7a || c == 0x42 || c == 0x3c || c == 0x3e || c == 0x62) {
      if (c == 0x62 && !this.eof()) {
        this.bumpSpace();
        if (this.char() == 0x7b && this.specialWordBoundary() < 0) return -1;
      }
      if (inClass) return this.fail("invalid escape sequence found in character class");
      return 0;
    }
    return this.fail("unrecognized escape sequence");
  }

  specialWordBoundary(): i32 {
    const start = this.pos;
    if (!this.bumpAndSpace()) {
      return this.fail(
        "found either the beginning of a special word boundary or a bounded repetition on a \\b with an opening brace, but no closing brace",
      );
    }
    if (!isBoundaryChar(this.char())) {
      this.pos = start; // a counted repetition of \b
      return 0;
    }
    const name = new Array<i32>();
    while (!this.eof() && isBoundaryChar(this.char())) {
      name.push(this.char());
      this.bumpAndSpace();
    }
    if (this.eof() || this.char() != 0x7d) {
      return this.fail("special word boundary assertion is either unclosed or contains an invalid character");
    }
    this.pos++;
    const s = codePoints(name);
    if (s != "start" && s != "end" && s != "start-half" && s != "end-half") {
      return this.fail(
        "unrecognized special word boundary assertion, valid choices are: start, end, start-half or end-half",
      );
    }
    return 0;
  }

  /** `\xHH`, `\uHHHH`, `\UHHHHHHHH` or `\x{H...}`. */
  hex(digits: i32): i32 {
    if (!this.bumpAndSpace()) return this.fail("incomplete escape sequence, reached end of pattern prematurely");
    let n: i64 = 0;
    if (this.char() == 0x7b) {
      let count = 0;
      let tooLarge = false;
      while (true) {
        if (!this.bumpAndSpace()) return this.fail("incomplete escape sequence, reached end of pattern prematurely");
        const c = this.char();
        if (c == 0x7d) break;
        const d = hexDigit(c);
        if (d < 0) return this.fail("invalid hexadecimal digit");
        if (!tooLarge) n = n * 16 + d;
        if (n > 0xffffffff) tooLarge = true;
        count++;
      }
      this.pos++;
      if (count == 0) return this.fail("hexadecimal literal empty");
      if (tooLarge) n = 0xd800;
    } else {
      for (let i = 0; i < digits; i++) {
        if (i > 0 && !this.bumpAndSpace()) return this.fail("incomplete escape sequence, reached end of pattern prematurely");
        const d = hexDigit(this.char());
        if (d < 0) return this.fail("invalid hexadecimal digit");
        n = n * 16 + d;
      }
      this.pos++;
    }
    if (n > 0x10ffff || (n >= 0xd800 && n <= 0xdfff)) {
      return this.fail("hexadecimal literal is not a Unicode scalar value");
    }
    this.lit = <i32>n;
    return 0;
  }

  /** `[...]` at the cursor; returns its depth or -1. */
  classBracketed(): i32 {
    this.pos++; // [
    if (!this.eof()) this.bumpSpace();
    if (this.eof()) return this.fail("unclosed character class");
    if (this.char() == 0x5e) {
      if (!this.bumpAndSpace()) return this.fail("unclosed character class");
    }
    let items = 0;
    while (this.char() == 0x2d) {
      items++;
      if (!this.bumpAndSpace()) return this.fail("unclosed character class");
    }
    if (items == 0 && this.char() == 0x5d) {
      items++;
      if (!this.bumpAndSpace()) return this.fail("unclosed character class");
    }
    let depth = 0;
    let ops = 0;
    while (true) {
      this.bumpSpace();
      if (this.eof()) return this.fail("unclosed character class");
      const c = this.char();
      if (c == 0x5b) {
        if (this.asciiClass()) {
          items++;
          continue;
        }
        const d = this.classBracketed();
        if (d < 0) return -1;
        if (d > depth) depth = d;
        items++;
      } else if (c == 0x5d) {
        this.pos++;
        const set = items > 1 ? depth + 1 : depth;
        return 1 + set + ops;
      } else if ((c == 0x26 || c == 0x2d || c == 0x7e) && this.peek() == c) {
        // && -- ~~
        this.pos += 2;
        ops++;
      } else {
        if (this.classRange() < 0) return -1;
        items++;
      }
    }
  }

  /** `[:name:]` (or `[:^name:]`) inside a class; leaves the cursor alone if it is not one. */
  asciiClass(): bool {
    const start = this.pos;
    if (!this.bump() || this.char() != 0x3a || !this.bump()) {
      this.pos = start;
      return false;
    }
    if (this.char() == 0x5e && !this.bump()) {
      this.pos = start;
      return false;
    }
    const nameStart = this.pos;
    while (this.char() != 0x3a && this.bump()) {}
    if (this.eof()) {
      this.pos = start;
      return false;
    }
    const name = codePoints(this.cps.slice(nameStart, this.pos));
    if (!this.bumpIf(":]") || !ASCII_CLASSES.includes(name)) {
      this.pos = start;
      return false;
    }
    return true;
  }

  /** A class item: a literal, a class escape, or a range `a-z`. */
  classRange(): i32 {
    const first = this.primitive(true);
    if (first < 0) return -1;
    this.bumpSpace();
    if (this.eof()) return this.fail("unclosed character class");
    const start = this.pos;
    if (this.char() != 0x2d) return 0;
    // `-` before `]` or `-` is a literal `-` (or the `--` operator).
    this.pos++;
    this.bumpSpace();
    const next = this.char();
    this.pos = start;
    if (next == 0x5d || next == 0x2d) return 0;
    const lo = this.lit;
    if (!this.bumpAndSpace()) return this.fail("unclosed character class");
    const second = this.primitive(true);
    if (second < 0) return -1;
    if (first != 1 || second != 1) return this.fail("invalid range boundary, must be a literal");
    if (lo > this.lit) return this.fail("invalid character class range, the start must be <= the end");
    return 0;
  }
}

const ASCII_CLASSES: Array<string> = [
  "alnum",
  "alpha",
  "ascii",
  "blank",
  "cntrl",
  "digit",
  "graph",
  "lower",
  "print",
  "punct",
  "space",
  "upper",
  "word",
  "xdigit",
];

function codePoints(cps: Array<i32>): string {
  const out = new Array<string>();
  for (let i = 0; i < cps.length; i++) out.push(String.fromCodePoint(cps[i]));
  return out.join("");
}

function hexDigit(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

function isBoundaryChar(c: i32): bool {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2d;
}

/** regex-syntax's meta characters. */
function isMeta(c: i32): bool {
  // \ . + * ? ( ) | [ ] { } ^ $ # & - ~
  return (
    c == 0x5c || c == 0x2e || c == 0x2b || c == 0x2a || c == 0x3f || c == 0x28 || c == 0x29 || c == 0x7c ||
    c == 0x5b || c == 0x5d || c == 0x7b || c == 0x7d || c == 0x5e || c == 0x24 || c == 0x23 || c == 0x26 ||
    c == 0x2d || c == 0x7e
  );
}

/** ASCII other than letters, digits, `<` and `>` may be escaped needlessly. */
function isEscapeable(c: i32): bool {
  if (c >= 0x80) return false;
  if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) return false;
  return c != 0x3c && c != 0x3e;
}

/** Why `pattern` is not a valid regex, or "" if it is. */
export function regexError(pattern: string): string {
  const p = new RegexParser(pattern);
  const depth = p.alternation();
  if (depth < 0) return p.error;
  if (!p.eof()) {
    // Only an unmatched `)` stops the top-level alternation early.
    return "unopened group";
  }
  if (depth > NEST_LIMIT) {
    return "exceed the maximum number of nested parentheses/brackets (" + NEST_LIMIT.toString() + ")";
  }
  return "";
}
