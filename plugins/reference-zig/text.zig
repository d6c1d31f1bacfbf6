//! Text as the Rust reference shows it: `{:?}` quoting, ASCII lowercasing, trimming.

const std = @import("std");
const xdst = @import("xdst");

/// `s` quoted and escaped as Rust's `{:?}` shows a string: `"a\"b"` (the SDK's, which its
/// decoding messages use).
pub const debug = xdst.quote;

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
