//! Regex syntax checking: the rules of the `regex-syntax` AST parser the Rust reference uses
//! (RE2 syntax; no look-around, no back-references). It only decides whether a pattern parses,
//! and why not, in regex-syntax's words; it builds nothing.

const std = @import("std");
const text = @import("text.zig");

const nest_limit = 250;

/// Why `pattern` is not a valid regex, or null if it is.
pub fn check(arena: std.mem.Allocator, pattern: []const u8) ?[]const u8 {
    var cps: std.ArrayList(u21) = .empty;
    var it = std.unicode.Utf8View.initUnchecked(pattern).iterator();
    while (it.nextCodepoint()) |c| cps.append(arena, c) catch return "out of memory";
    var p: Parser = .{ .cps = cps.items, .arena = arena };
    const depth = p.alternation() catch return p.why;
    if (!p.eof()) return "unopened group"; // only an unmatched `)` stops the top level early
    if (depth > nest_limit) return "exceed the maximum number of nested parentheses/brackets (250)";
    return null;
}

const Fail = error{Regex};

/// A group that only sets flags (`(?i)`): no operand for a repetition.
const flags_only: u32 = std.math.maxInt(u32);

const Parser = struct {
    cps: []const u21,
    arena: std.mem.Allocator,
    pos: usize = 0,
    /// The `x` flag: whitespace and `#` comments are ignored.
    x: bool = false,
    names: std.ArrayList([]const u21) = .empty,
    why: []const u8 = "",
    /// The last literal `primitive` read, for range checks.
    lit: u32 = 0,

    fn eof(p: *Parser) bool {
        return p.pos >= p.cps.len;
    }

    fn char(p: *Parser) i32 {
        return if (p.pos < p.cps.len) p.cps[p.pos] else -1;
    }

    fn peek(p: *Parser) i32 {
        return if (p.pos + 1 < p.cps.len) p.cps[p.pos + 1] else -1;
    }

    fn bump(p: *Parser) bool {
        if (p.eof()) return false;
        p.pos += 1;
        return !p.eof();
    }

    fn bumpSpace(p: *Parser) void {
        if (!p.x) return;
        while (!p.eof()) {
            const c = p.cps[p.pos];
            if (text.isWhitespace(c)) {
                p.pos += 1;
            } else if (c == '#') {
                while (!p.eof()) {
                    const d = p.cps[p.pos];
                    p.pos += 1;
                    if (d == '\n') break;
                }
            } else break;
        }
    }

    fn bumpAndSpace(p: *Parser) bool {
        if (!p.bump()) return false;
        p.bumpSpace();
        return !p.eof();
    }

    fn bumpIf(p: *Parser, s: []const u8) bool {
        if (p.pos + s.len > p.cps.len) return false;
        for (s, 0..) |c, i| if (p.cps[p.pos + i] != c) return false;
        p.pos += s.len;
        return true;
    }

    fn fail(p: *Parser, why: []const u8) Fail {
        if (p.why.len == 0) p.why = why;
        return error.Regex;
    }

    const incomplete = "incomplete escape sequence, reached end of pattern prematurely";

    /// An alternation up to `)` or the end; returns its nesting depth.
    fn alternation(p: *Parser) Fail!u32 {
        var depth: u32 = 0;
        var count: u32 = 0;
        while (true) {
            depth = @max(depth, try p.concat());
            count += 1;
            if (p.char() != '|') break;
            p.pos += 1;
        }
        return if (count > 1) depth + 1 else depth;
    }

    fn concat(p: *Parser) Fail!u32 {
        var items: u32 = 0;
        var last_is_flags = true; // no item yet: nothing to repeat
        var depth: u32 = 0;
        var last_depth: u32 = 0;
        while (true) {
            p.bumpSpace();
            if (p.eof()) break;
            const c = p.char();
            if (c == ')' or c == '|') break;
            switch (c) {
                '(' => {
                    const d = try p.group();
                    items += 1;
                    depth = @max(depth, last_depth);
                    last_is_flags = d == flags_only;
                    last_depth = if (last_is_flags) 0 else d;
                },
                '[' => {
                    const d = try p.classBracketed();
                    items += 1;
                    depth = @max(depth, last_depth);
                    last_is_flags = false;
                    last_depth = d;
                },
                '?', '*', '+' => {
                    if (last_is_flags) return p.fail("repetition operator missing expression");
                    last_depth += 1;
                    if (p.bump() and p.char() == '?') _ = p.bump();
                },
                '{' => {
                    if (last_is_flags) return p.fail("repetition operator missing expression");
                    try p.counted();
                    last_depth += 1;
                },
                else => {
                    _ = try p.primitive(false);
                    items += 1;
                    depth = @max(depth, last_depth);
                    last_is_flags = false;
                    last_depth = 0;
                },
            }
        }
        depth = @max(depth, last_depth);
        return if (items > 1) depth + 1 else depth;
    }

    /// `{n}`, `{n,}`, `{n,m}`, optionally lazy.
    fn counted(p: *Parser) Fail!void {
        const unclosed = "unclosed counted repetition";
        if (!p.bumpAndSpace()) return p.fail(unclosed);
        const min = try p.decimal();
        var max = min;
        if (p.eof()) return p.fail(unclosed);
        if (p.char() == ',') {
            if (!p.bumpAndSpace()) return p.fail(unclosed);
            max = if (p.char() != '}') try p.decimal() else std.math.maxInt(u32);
        }
        if (p.eof() or p.char() != '}') return p.fail(unclosed);
        if (p.bumpAndSpace() and p.char() == '?') _ = p.bumpAndSpace();
        if (min > max) return p.fail("invalid repetition count range, the start must be <= the end");
    }

    /// A decimal, whitespace around it skipped.
    fn decimal(p: *Parser) Fail!u32 {
        while (!p.eof() and text.isWhitespace(p.cps[p.pos])) p.pos += 1;
        var n: u64 = 0;
        var count: usize = 0;
        while (!p.eof() and p.cps[p.pos] >= '0' and p.cps[p.pos] <= '9') {
            n = n * 10 + (p.cps[p.pos] - '0');
            if (n > std.math.maxInt(u32)) return p.fail("decimal literal invalid");
            count += 1;
            p.pos += 1;
        }
        while (!p.eof() and text.isWhitespace(p.cps[p.pos])) p.pos += 1;
        if (count == 0) return p.fail("repetition quantifier expects a valid decimal");
        return @intCast(n);
    }

    /// A group; returns its depth, or `flags_only` for `(?flags)`.
    fn group(p: *Parser) Fail!u32 {
        p.pos += 1; // (
        p.bumpSpace();
        if (p.bumpIf("?=") or p.bumpIf("?!") or p.bumpIf("?<=") or p.bumpIf("?<!"))
            return p.fail("look-around, including look-ahead and look-behind, is not supported");
        const outer_x = p.x;
        if (p.bumpIf("?P<") or p.bumpIf("?<")) {
            try p.captureName();
        } else if (p.bumpIf("?")) {
            if (p.eof()) return p.fail("unclosed group");
            const flags = try p.flagItems();
            const end = p.char();
            p.pos += 1;
            if (end == ')') {
                // `(?flags)` sets flags for the rest of the enclosing group.
                if (flags == 0) return p.fail("repetition operator missing expression");
                return flags_only;
            }
        }
        const inner = p.alternation() catch |e| {
            p.x = outer_x;
            return e;
        };
        p.x = outer_x;
        if (p.char() != ')') return p.fail("unclosed group");
        p.pos += 1;
        return inner + 1;
    }

    fn captureName(p: *Parser) Fail!void {
        if (p.eof()) return p.fail("unclosed capture group name");
        const start = p.pos;
        while (p.char() != '>') {
            const c = p.char();
            const first = p.pos == start;
            const letter = (c >= 'A' and c <= 'Z') or (c >= 'a' and c <= 'z') or c >= 0x80;
            const ok = c == '_' or letter or (!first and ((c >= '0' and c <= '9') or c == '.' or c == '[' or c == ']'));
            if (!ok) return p.fail("invalid capture group character");
            if (!p.bump()) break;
        }
        if (p.eof()) return p.fail("unclosed capture group name");
        const name = p.cps[start..p.pos];
        p.pos += 1; // >
        if (name.len == 0) return p.fail("empty capture group name");
        for (p.names.items) |n| if (std.mem.eql(u21, n, name)) return p.fail("duplicate capture group name");
        p.names.append(p.arena, name) catch return p.fail("out of memory");
    }

    /// Flags up to `:` or `)`; returns how many items. Applies `x` to the parser.
    fn flagItems(p: *Parser) Fail!u32 {
        var items: u32 = 0;
        var negated = false;
        var last_was_negation = false;
        var seen: [8]i32 = undefined;
        var n_seen: usize = 0;
        var x = p.x;
        while (p.char() != ':' and p.char() != ')') {
            const c = p.char();
            if (c == '-') {
                if (negated) return p.fail("flag negation operator repeated");
                negated = true;
                last_was_negation = true;
            } else {
                last_was_negation = false;
                if (std.mem.indexOfScalar(u8, "imsUuRx", if (c >= 0 and c < 128) @intCast(c) else 0) == null or c == 0)
                    return p.fail("unrecognized flag");
                if (std.mem.indexOfScalar(i32, seen[0..n_seen], c) != null) return p.fail("duplicate flag");
                seen[n_seen] = c;
                n_seen += 1;
                if (c == 'x') x = !negated;
            }
            items += 1;
            if (!p.bump()) return p.fail("expected flag but got end of regex");
        }
        if (last_was_negation) return p.fail("dangling flag negation operator");
        p.x = x;
        return items;
    }

    /// A literal, `.`, `^`, `$` or escape. In a class (`in_class`), returns 1 for a literal,
    /// 2 for a class escape (`\d`, `\pL`); outside, 0.
    fn primitive(p: *Parser, in_class: bool) Fail!u8 {
        const c = p.char();
        if (c == '\\') return p.escape(in_class);
        p.lit = @intCast(c);
        p.pos += 1;
        return if (in_class) 1 else 0;
    }

    fn escape(p: *Parser, in_class: bool) Fail!u8 {
        const literal: u8 = if (in_class) 1 else 0;
        if (!p.bump()) return p.fail(incomplete);
        const c = p.char();
        if (c >= '0' and c <= '9') return p.fail("backreferences are not supported");
        switch (c) {
            'x', 'u', 'U' => {
                try p.hex(if (c == 'x') 2 else if (c == 'u') 4 else 8);
                return literal;
            },
            'p', 'P' => {
                if (!p.bumpAndSpace()) return p.fail(incomplete);
                if (p.char() == '{') {
                    while (p.char() != '}') if (!p.bumpAndSpace()) return p.fail(incomplete);
                }
                p.pos += 1;
                return if (in_class) 2 else 0;
            },
            'd', 's', 'w', 'D', 'S', 'W' => {
                p.pos += 1;
                return if (in_class) 2 else 0;
            },
            else => {},
        }
        p.pos += 1;
        p.lit = @intCast(c);
        if (isMeta(c) or isEscapeable(c)) return literal;
        const special: i32 = switch (c) {
            'a' => 7,
            'f' => 12,
            't' => 9,
            'n' => 10,
            'r' => 13,
            'v' => 11,
            else => -1,
        };
        if (special >= 0) {
            p.lit = @intCast(special);
            return literal;
        }
        // Assertions: \A \z \B \< \>, and \b with an optional {start}, {end}, ...
        if (c == 'A' or c == 'z' or c == 'B' or c == '<' or c == '>' or c == 'b') {
            if (c == 'b' and !p.eof()) {
                p.bumpSpace();
                if (p.char() == '{') try p.specialWordBoundary();
            }
            if (in_class) return p.fail("invalid escape sequence found in character class");
            return 0;
        }
        return p.fail("unrecognized escape sequence");
    }

    fn specialWordBoundary(p: *Parser) Fail!void {
        const start = p.pos;
        if (!p.bumpAndSpace()) return p.fail("found either the beginning of a special word boundary or a bounded repetition on a \\b with an opening brace, but no closing brace");
        if (!isBoundaryChar(p.char())) {
            p.pos = start; // a counted repetition of \b
            return;
        }
        var name: std.ArrayList(u8) = .empty;
        while (!p.eof() and isBoundaryChar(p.char())) {
            name.append(p.arena, @intCast(p.char())) catch return p.fail("out of memory");
            _ = p.bumpAndSpace();
        }
        if (p.eof() or p.char() != '}') return p.fail("special word boundary assertion is either unclosed or contains an invalid character");
        p.pos += 1;
        for ([_][]const u8{ "start", "end", "start-half", "end-half" }) |ok| {
            if (std.mem.eql(u8, name.items, ok)) return;
        }
        return p.fail("unrecognized special word boundary assertion, valid choices are: start, end, start-half or end-half");
    }

    /// `\xHH`, `\uHHHH`, `\UHHHHHHHH` or `\x{H...}`.
    fn hex(p: *Parser, digits: usize) Fail!void {
        if (!p.bumpAndSpace()) return p.fail(incomplete);
        var n: u64 = 0;
        if (p.char() == '{') {
            var count: usize = 0;
            var too_large = false;
            while (true) {
                if (!p.bumpAndSpace()) return p.fail(incomplete);
                const c = p.char();
                if (c == '}') break;
                const d = hexDigit(c) orelse return p.fail("invalid hexadecimal digit");
                if (!too_large) n = n * 16 + d;
                if (n > 0xffffffff) too_large = true;
                count += 1;
            }
            p.pos += 1;
            if (count == 0) return p.fail("hexadecimal literal empty");
            if (too_large) n = 0xd800;
        } else {
            for (0..digits) |i| {
                if (i > 0 and !p.bumpAndSpace()) return p.fail(incomplete);
                const d = hexDigit(p.char()) orelse return p.fail("invalid hexadecimal digit");
                n = n * 16 + d;
            }
            p.pos += 1;
        }
        if (n > 0x10ffff or (n >= 0xd800 and n <= 0xdfff)) return p.fail("hexadecimal literal is not a Unicode scalar value");
        p.lit = @intCast(n);
    }

    /// `[...]` at the cursor; returns its depth.
    fn classBracketed(p: *Parser) Fail!u32 {
        const unclosed = "unclosed character class";
        p.pos += 1; // [
        if (!p.eof()) p.bumpSpace();
        if (p.eof()) return p.fail(unclosed);
        if (p.char() == '^' and !p.bumpAndSpace()) return p.fail(unclosed);
        var items: u32 = 0;
        while (p.char() == '-') {
            items += 1;
            if (!p.bumpAndSpace()) return p.fail(unclosed);
        }
        if (items == 0 and p.char() == ']') {
            items += 1;
            if (!p.bumpAndSpace()) return p.fail(unclosed);
        }
        var depth: u32 = 0;
        var ops: u32 = 0;
        while (true) {
            p.bumpSpace();
            if (p.eof()) return p.fail(unclosed);
            const c = p.char();
            if (c == '[') {
                if (p.asciiClass()) {
                    items += 1;
                    continue;
                }
                depth = @max(depth, try p.classBracketed());
                items += 1;
            } else if (c == ']') {
                p.pos += 1;
                const set = if (items > 1) depth + 1 else depth;
                return 1 + set + ops;
            } else if ((c == '&' or c == '-' or c == '~') and p.peek() == c) {
                p.pos += 2;
                ops += 1;
            } else {
                try p.classRange();
                items += 1;
            }
        }
    }

    /// `[:name:]` (or `[:^name:]`) inside a class; leaves the cursor alone if it is not one.
    fn asciiClass(p: *Parser) bool {
        const start = p.pos;
        if (!p.bump() or p.char() != ':' or !p.bump()) {
            p.pos = start;
            return false;
        }
        if (p.char() == '^' and !p.bump()) {
            p.pos = start;
            return false;
        }
        const name_start = p.pos;
        while (p.char() != ':' and p.bump()) {}
        if (p.eof()) {
            p.pos = start;
            return false;
        }
        const name = p.cps[name_start..p.pos];
        if (!p.bumpIf(":]") or !isAsciiClass(name)) {
            p.pos = start;
            return false;
        }
        return true;
    }

    /// A class item: a literal, a class escape, or a range `a-z`.
    fn classRange(p: *Parser) Fail!void {
        const first = try p.primitive(true);
        p.bumpSpace();
        if (p.eof()) return p.fail("unclosed character class");
        const start = p.pos;
        if (p.char() != '-') return;
        // `-` before `]` or `-` is a literal `-` (or the `--` operator).
        p.pos += 1;
        p.bumpSpace();
        const next = p.char();
        p.pos = start;
        if (next == ']' or next == '-') return;
        const lo = p.lit;
        if (!p.bumpAndSpace()) return p.fail("unclosed character class");
        const second = try p.primitive(true);
        if (first != 1 or second != 1) return p.fail("invalid range boundary, must be a literal");
        if (lo > p.lit) return p.fail("invalid character class range, the start must be <= the end");
    }
};

fn isAsciiClass(name: []const u21) bool {
    const classes = [_][]const u8{ "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper", "word", "xdigit" };
    outer: for (classes) |c| {
        if (c.len != name.len) continue;
        for (c, name) |a, b| if (a != b) continue :outer;
        return true;
    }
    return false;
}

fn hexDigit(c: i32) ?u64 {
    if (c < 0 or c > 127) return null;
    return std.fmt.charToDigit(@intCast(c), 16) catch null;
}

fn isBoundaryChar(c: i32) bool {
    return (c >= 'A' and c <= 'Z') or (c >= 'a' and c <= 'z') or c == '-';
}

/// regex-syntax's meta characters.
fn isMeta(c: i32) bool {
    return switch (c) {
        '\\', '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '^', '$', '#', '&', '-', '~' => true,
        else => false,
    };
}

/// ASCII other than letters, digits, `<` and `>` may be escaped needlessly.
fn isEscapeable(c: i32) bool {
    if (c < 0 or c >= 0x80) return false;
    if ((c >= '0' and c <= '9') or (c >= 'A' and c <= 'Z') or (c >= 'a' and c <= 'z')) return false;
    return c != '<' and c != '>';
}
