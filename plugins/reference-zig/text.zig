//! Text as the Rust reference shows it: `{:?}` quoting, ASCII lowercasing, trimming.

const std = @import("std");

/// `s` quoted and escaped as Rust's `{:?}` shows a string: `"a\"b"`.
pub fn debug(arena: std.mem.Allocator, s: []const u8) []const u8 {
    var out: std.ArrayList(u8) = .empty;
    out.ensureTotalCapacity(arena, s.len + 2) catch return s;
    out.appendAssumeCapacity('"');
    var it = std.unicode.Utf8View.initUnchecked(s).iterator();
    while (it.nextCodepointSlice()) |bytes| {
        const c = std.unicode.utf8Decode(bytes) catch 0xfffd;
        switch (c) {
            '"' => out.appendSlice(arena, "\\\"") catch {},
            '\\' => out.appendSlice(arena, "\\\\") catch {},
            '\n' => out.appendSlice(arena, "\\n") catch {},
            '\r' => out.appendSlice(arena, "\\r") catch {},
            '\t' => out.appendSlice(arena, "\\t") catch {},
            0 => out.appendSlice(arena, "\\0") catch {},
            else => if (isControl(c))
                out.print(arena, "\\u{{{x}}}", .{c}) catch {}
            else
                out.appendSlice(arena, bytes) catch {},
        }
    }
    out.append(arena, '"') catch {};
    return out.items;
}

/// Rust's `char::is_control` (category Cc).
pub fn isControl(c: u21) bool {
    return c < 0x20 or (c >= 0x7f and c <= 0x9f);
}

/// Rust's `char::is_whitespace` (White_Space).
pub fn isWhitespace(c: u21) bool {
    return switch (c) {
        0x09...0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000...0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000 => true,
        else => false,
    };
}

/// Rust's `str::trim`: Unicode whitespace off both ends.
pub fn trim(s: []const u8) []const u8 {
    var a: usize = 0;
    var b: usize = s.len;
    while (a < b) {
        const n = std.unicode.utf8ByteSequenceLength(s[a]) catch 1;
        const c = std.unicode.utf8Decode(s[a..@min(a + n, b)]) catch break;
        if (!isWhitespace(c)) break;
        a += n;
    }
    while (b > a) {
        var start = b - 1;
        while (start > a and s[start] & 0xc0 == 0x80) start -= 1;
        const c = std.unicode.utf8Decode(s[start..b]) catch break;
        if (!isWhitespace(c)) break;
        b = start;
    }
    return s[a..b];
}

/// Rust's `str::to_ascii_lowercase`.
pub fn asciiLower(arena: std.mem.Allocator, s: []const u8) []const u8 {
    for (s) |c| {
        if (c >= 'A' and c <= 'Z') return std.ascii.allocLowerString(arena, s) catch s;
    }
    return s;
}
