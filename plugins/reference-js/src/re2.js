// A syntax check for RE2 regular expressions, written to accept and refuse what the Rust
// reference's checker (the `regex-syntax` crate's AST parser) does: groups `(...)`, `(?:...)`,
// `(?P<name>...)`, `(?<name>...)`, flags `(?imsUuRx-...)`, classes with nesting, ranges and
// `&&` `--` `~~`, `[:alpha:]`, escapes `\d \pL \p{Greek} \x7F \x{10FFFF} \A \z \b{start}`,
// repetitions `* + ? {n} {n,} {n,m}` (lazy with `?`). No look-around, no back-references.
// Names of Unicode classes are not checked here (nor by the reference's parser).

/** What is wrong with `pattern` in regex-syntax's words, or undefined if it parses. */
export function re2SyntaxError(pattern) {
  try {
    new Parser(pattern).parse();
    return undefined;
  } catch (e) {
    if (e instanceof SyntaxProblem) return e.message;
    throw e;
  }
}

class SyntaxProblem extends Error {}

const NEST_LIMIT = 250;
const META = new Set("\\.+*?()|[]{}^$#&-~");
const FLAGS = new Set("imsUuRx");
const ASCII_CLASSES = new Set([
  "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph",
  "lower", "print", "punct", "space", "upper", "word", "xdigit",
]);
const LEAF = { k: "leaf" };

const fail = (message) => {
  throw new SyntaxProblem(message);
};
const isWhitespace = (c) => /\p{White_Space}/u.test(c);
const isHex = (c) => /^[0-9a-fA-F]$/.test(c);
const isEscapeable = (c) => META.has(c) || (c.codePointAt(0) < 0x80 && !/[0-9A-Za-z<>]/.test(c));
const isCaptureChar = (c, first) =>
  first ? c === "_" || /\p{Alphabetic}/u.test(c) : c === "_" || c === "." || c === "[" || c === "]" || /[\p{Alphabetic}\p{N}]/u.test(c);

// Small AST, only as much as the nesting limit needs: a concatenation or alternation of one
// item is that item, of none an empty leaf.
const collapse = (k, subs) => (subs.length === 0 ? LEAF : subs.length === 1 ? subs[0] : { k, subs });

class Parser {
  constructor(pattern) {
    this.c = Array.from(pattern); // code points
    this.i = 0;
    this.ignoreWhitespace = false;
    this.groups = []; // {k: "group", concat, ws} or {k: "alt", subs}
    this.names = new Set();
  }

  eof() {
    return this.i >= this.c.length;
  }

  char() {
    return this.c[this.i];
  }

  peek() {
    return this.c[this.i + 1];
  }

  bump() {
    if (this.eof()) return false;
    this.i++;
    return !this.eof();
  }

  bumpIf(prefix) {
    const p = Array.from(prefix);
    if (p.some((c, j) => this.c[this.i + j] !== c)) return false;
    this.i += p.length;
    return true;
  }

  bumpAndBumpSpace() {
    if (!this.bump()) return false;
    this.bumpSpace();
    return !this.eof();
  }

  /** Under the `x` flag: skips whitespace and `#` comments. */
  bumpSpace() {
    if (!this.ignoreWhitespace) return;
    while (!this.eof()) {
      if (isWhitespace(this.char())) this.bump();
      else if (this.char() === "#") {
        this.bump();
        while (!this.eof()) {
          const c = this.char();
          this.bump();
          if (c === "\n") break;
        }
      } else break;
    }
  }

  /** Like peek, skipping what bumpSpace would (quirks included, as regex-syntax has them). */
  peekSpace() {
    if (!this.ignoreWhitespace) return this.peek();
    if (this.eof()) return undefined;
    let inComment = false;
    for (let j = this.i + 1; j < this.c.length; j++) {
      const c = this.c[j];
      if (isWhitespace(c)) continue;
      if (!inComment && c === "#") inComment = true;
      else if (inComment && c === "\n") inComment = false;
      else return c;
    }
    return this.c[this.i + 1];
  }

  parse() {
    let concat = [];
    for (;;) {
      this.bumpSpace();
      if (this.eof()) break;
      switch (this.char()) {
        case "(":
          concat = this.pushGroup(concat);
          break;
        case ")":
          concat = this.popGroup(concat);
          break;
        case "|":
          this.pushAlternate(concat);
          concat = [];
          break;
        case "[":
          concat.push(this.parseSetClass());
          break;
        case "?":
        case "*":
        case "+":
          this.repetition(concat);
          if (this.bump() && this.char() === "?") this.bump();
          break;
        case "{":
          this.countedRepetition(concat);
          break;
        default:
          this.primitive();
          concat.push(LEAF);
      }
    }
    checkNesting(this.popGroupEnd(concat));
  }

  pushAlternate(concat) {
    const top = this.groups[this.groups.length - 1];
    if (top && top.k === "alt") top.subs.push(collapse("concat", concat));
    else this.groups.push({ k: "alt", subs: [collapse("concat", concat)] });
    this.bump();
  }

  pushGroup(concat) {
    const group = this.parseGroup();
    if (group.flagsOnly) {
      if (group.ws !== undefined) this.ignoreWhitespace = group.ws;
      concat.push({ k: "flags" });
      return concat;
    }
    this.groups.push({ k: "group", concat, ws: this.ignoreWhitespace });
    if (group.ws !== undefined) this.ignoreWhitespace = group.ws;
    return [];
  }

  popGroup(inner) {
    let top = this.groups.pop();
    let alt;
    if (top && top.k === "alt") {
      alt = top;
      top = this.groups.pop();
    }
    if (!top || top.k !== "group") fail("unopened group");
    this.ignoreWhitespace = top.ws;
    this.bump();
    const body = alt ? { k: "alt", subs: [...alt.subs, collapse("concat", inner)] } : collapse("concat", inner);
    top.concat.push({ k: "group", subs: [body] });
    return top.concat;
  }

  popGroupEnd(concat) {
    const top = this.groups.pop();
    let ast;
    if (!top) ast = collapse("concat", concat);
    else if (top.k === "alt") ast = { k: "alt", subs: [...top.subs, collapse("concat", concat)] };
    else fail("unclosed group");
    if (this.groups.length > 0) fail("unclosed group");
    return ast;
  }

  /** Applies a repetition operator to the last item of `concat`. */
  repetition(concat) {
    const last = concat.pop();
    if (last === undefined || last.k === "flags") fail("repetition operator missing expression");
    concat.push({ k: "rep", subs: [last] });
  }

  countedRepetition(concat) {
    this.repetition(concat);
    if (!this.bumpAndBumpSpace()) fail("unclosed counted repetition");
    const decimal = () => {
      try {
        return this.decimal();
      } catch (e) {
        if (e.message === "decimal literal empty") return new SyntaxProblem("repetition quantifier expects a valid decimal");
        return e;
      }
    };
    const unwrap = (v) => {
      if (v instanceof Error) throw v;
      return v;
    };
    const start = decimal();
    if (this.eof()) fail("unclosed counted repetition");
    let min;
    let max;
    if (this.char() === ",") {
      if (!this.bumpAndBumpSpace()) fail("unclosed counted repetition");
      min = unwrap(start);
      if (this.char() !== "}") max = unwrap(decimal());
    } else {
      min = max = unwrap(start);
    }
    if (this.eof() || this.char() !== "}") fail("unclosed counted repetition");
    if (this.bumpAndBumpSpace() && this.char() === "?") this.bump();
    if (max !== undefined && min > max) fail("invalid repetition count range, the start must be <= the end");
  }

  decimal() {
    while (!this.eof() && isWhitespace(this.char())) this.bump();
    let digits = "";
    while (!this.eof() && this.char() >= "0" && this.char() <= "9") {
      digits += this.char();
      this.bumpAndBumpSpace();
    }
    while (!this.eof() && isWhitespace(this.char())) this.bumpAndBumpSpace();
    if (digits === "") fail("decimal literal empty");
    const n = Number(digits);
    if (n > 0xffffffff) fail("decimal literal invalid");
    return n;
  }

  /** Returns {flagsOnly, ws}: ws is the group's `x` flag state, if it sets one. */
  parseGroup() {
    this.bump();
    this.bumpSpace();
    if (this.bumpIf("?=") || this.bumpIf("?!") || this.bumpIf("?<=") || this.bumpIf("?<!")) {
      fail("look-around, including look-ahead and look-behind, is not supported");
    }
    if (this.bumpIf("?P<") || this.bumpIf("?<")) {
      this.captureName();
      return { flagsOnly: false };
    }
    if (!this.bumpIf("?")) return { flagsOnly: false };
    if (this.eof()) fail("unclosed group");
    const { items, ws } = this.flags();
    const end = this.char();
    this.bump();
    if (end === ")") {
      if (items === 0) fail("repetition operator missing expression");
      return { flagsOnly: true, ws };
    }
    return { flagsOnly: false, ws };
  }

  captureName() {
    if (this.eof()) fail("unclosed capture group name");
    const start = this.i;
    for (;;) {
      if (this.char() === ">") break;
      if (!isCaptureChar(this.char(), this.i === start)) fail("invalid capture group character");
      if (!this.bump()) break;
    }
    const end = this.i;
    if (this.eof()) fail("unclosed capture group name");
    this.bump();
    if (end === start) fail("empty capture group name");
    const name = this.c.slice(start, end).join("");
    if (this.names.has(name)) fail("duplicate capture group name");
    this.names.add(name);
  }

  /** Flags up to `:` or `)`; returns how many items and the `x` flag's state, if set. */
  flags() {
    const seen = new Set();
    let items = 0;
    let negated = false;
    let lastWasNegation = false;
    let ws;
    while (this.char() !== ":" && this.char() !== ")") {
      const c = this.char();
      if (c === "-") {
        if (seen.has("-")) fail("flag negation operator repeated");
        negated = true;
        lastWasNegation = true;
      } else {
        lastWasNegation = false;
        if (!FLAGS.has(c)) fail("unrecognized flag");
        if (seen.has(c)) fail("duplicate flag");
        if (c === "x") ws = !negated;
      }
      seen.add(c);
      items++;
      if (!this.bump()) fail("expected flag but got end of regex");
    }
    if (lastWasNegation) fail("dangling flag negation operator");
    return { items, ws };
  }

  /** A literal, `.`, `^`, `$`, or an escape. Returns {kind, c}: a literal's character. */
  primitive() {
    if (this.char() === "\\") return this.escape();
    const c = this.char();
    this.bump();
    return { kind: "literal", c };
  }

  escape() {
    if (!this.bump()) fail("incomplete escape sequence, reached end of pattern prematurely");
    const c = this.char();
    if (c >= "0" && c <= "9") fail("backreferences are not supported");
    if (c === "x" || c === "u" || c === "U") return { kind: "literal", c: this.hex(c) };
    if (c === "p" || c === "P") {
      this.unicodeClass();
      return { kind: "class" };
    }
    if ("dswDSW".includes(c)) {
      this.bump();
      return { kind: "class" };
    }
    this.bump();
    if (isEscapeable(c)) return { kind: "literal", c };
    const special = { a: "\x07", f: "\f", t: "\t", n: "\n", r: "\r", v: "\v" }[c];
    if (special) return { kind: "literal", c: special };
    if (c === "b") {
      if (!this.eof() && this.char() === "{") this.specialWordBoundary();
      return { kind: "assertion" };
    }
    if ("AzB<>".includes(c)) return { kind: "assertion" };
    return fail("unrecognized escape sequence");
  }

  /** After `\b`, at `{`: `\b{start}` and friends, or leaves `{` for a counted repetition. */
  specialWordBoundary() {
    const start = this.i;
    if (!this.bumpAndBumpSpace()) {
      fail("found either the beginning of a special word boundary or a bounded repetition on a \\b with an opening brace, but no closing brace");
    }
    const valid = (c) => /^[A-Za-z-]$/.test(c);
    if (!valid(this.char())) {
      this.i = start;
      return;
    }
    let name = "";
    while (!this.eof() && valid(this.char())) {
      name += this.char();
      this.bumpAndBumpSpace();
    }
    if (this.eof() || this.char() !== "}") {
      fail("special word boundary assertion is either unclosed or contains an invalid character");
    }
    this.bump();
    if (!["start", "end", "start-half", "end-half"].includes(name)) {
      fail("unrecognized special word boundary assertion, valid choices are: start, end, start-half or end-half");
    }
  }

  hex(kind) {
    const eofMessage = "incomplete escape sequence, reached end of pattern prematurely";
    if (!this.bumpAndBumpSpace()) fail(eofMessage);
    let digits = "";
    if (this.char() === "{") {
      while (this.bumpAndBumpSpace() && this.char() !== "}") {
        if (!isHex(this.char())) fail("invalid hexadecimal digit");
        digits += this.char();
      }
      if (this.eof()) fail(eofMessage);
      this.bumpAndBumpSpace();
      if (digits === "") fail("hexadecimal literal empty");
    } else {
      const count = { x: 2, u: 4, U: 8 }[kind];
      for (let n = 0; n < count; n++) {
        if (n > 0 && !this.bumpAndBumpSpace()) fail(eofMessage);
        if (!isHex(this.char())) fail("invalid hexadecimal digit");
        digits += this.char();
      }
      this.bumpAndBumpSpace();
    }
    const cp = BigInt(`0x${digits}`);
    if (cp > 0x10ffffn || (cp >= 0xd800n && cp <= 0xdfffn)) fail("hexadecimal literal is not a Unicode scalar value");
    return String.fromCodePoint(Number(cp));
  }

  unicodeClass() {
    const eofMessage = "incomplete escape sequence, reached end of pattern prematurely";
    if (!this.bumpAndBumpSpace()) fail(eofMessage);
    if (this.char() === "{") {
      while (this.bumpAndBumpSpace() && this.char() !== "}") {}
      if (this.eof()) fail(eofMessage);
      this.bump();
    } else {
      if (this.char() === "\\") fail("invalid Unicode character class");
      this.bumpAndBumpSpace();
    }
  }

  /** A bracketed class, `[` to its `]`, with nested classes and set operations. */
  parseSetClass() {
    const stack = []; // {k: "open", union, negated} or {k: "op", lhs}
    let union = this.classOpen(stack);
    for (;;) {
      this.bumpSpace();
      if (this.eof()) fail("unclosed character class");
      const c = this.char();
      if (c === "[") {
        if (stack.length > 0 && this.asciiClass()) {
          union.push(LEAF);
          continue;
        }
        union = this.classOpen(stack, union);
      } else if (c === "]") {
        const set = popClassOp(stack, collapse("union", union));
        const open = stack.pop();
        this.bump();
        const bracketed = { k: "bracketed", subs: [set] };
        if (stack.length === 0) return { k: "class", subs: [set] };
        union = open.union;
        union.push(bracketed);
      } else if ((c === "&" && this.peek() === "&") || (c === "-" && this.peek() === "-") || (c === "~" && this.peek() === "~")) {
        this.i += 2;
        const lhs = popClassOp(stack, collapse("union", union));
        stack.push({ k: "op", lhs });
        union = [];
      } else {
        union.push(this.classRange());
      }
    }
  }

  /** At `[`: reads `^` and leading `-` or `]` literals; pushes the parent union. */
  classOpen(stack, parent = []) {
    if (!this.bumpAndBumpSpace()) fail("unclosed character class");
    if (this.char() === "^" && !this.bumpAndBumpSpace()) fail("unclosed character class");
    const union = [];
    while (this.char() === "-") {
      union.push(LEAF);
      if (!this.bumpAndBumpSpace()) fail("unclosed character class");
    }
    if (union.length === 0 && this.char() === "]") {
      union.push(LEAF);
      if (!this.bumpAndBumpSpace()) fail("unclosed character class");
    }
    stack.push({ k: "open", union: parent });
    return union;
  }

  /** `[:alpha:]` inside a class; restores the position and returns false if it is not one. */
  asciiClass() {
    const start = this.i;
    const back = () => {
      this.i = start;
      return false;
    };
    if (!this.bump() || this.char() !== ":") return back();
    if (!this.bump()) return back();
    if (this.char() === "^" && !this.bump()) return back();
    const nameStart = this.i;
    while (this.char() !== ":" && this.bump()) {}
    if (this.eof()) return back();
    const name = this.c.slice(nameStart, this.i).join("");
    if (!this.bumpIf(":]")) return back();
    return ASCII_CLASSES.has(name) || back();
  }

  classRange() {
    const first = this.primitive();
    this.bumpSpace();
    if (this.eof()) fail("unclosed character class");
    if (this.char() !== "-" || this.peekSpace() === "]" || this.peekSpace() === "-") {
      if (first.kind === "assertion") fail("invalid escape sequence found in character class");
      return LEAF;
    }
    if (!this.bumpAndBumpSpace()) fail("unclosed character class");
    const second = this.primitive();
    if (first.kind !== "literal" || second.kind !== "literal") fail("invalid range boundary, must be a literal");
    if (first.c.codePointAt(0) > second.c.codePointAt(0)) {
      fail("invalid character class range, the start must be <= the end");
    }
    return LEAF;
  }

}

function popClassOp(stack, rhs) {
  const top = stack[stack.length - 1];
  if (top && top.k === "op") {
    stack.pop();
    return { k: "binop", subs: [top.lhs, rhs] };
  }
  return rhs;
}

/** regex-syntax refuses more than 250 levels of nested groups, classes and repetitions. */
function checkNesting(ast) {
  const work = [[ast, 0]];
  while (work.length > 0) {
    const [node, depth] = work.pop();
    if (!node.subs) continue;
    if (depth + 1 > NEST_LIMIT) fail(`exceed the maximum number of nested parentheses/brackets (${NEST_LIMIT})`);
    for (const sub of node.subs) work.push([sub, depth + 1]);
  }
}
