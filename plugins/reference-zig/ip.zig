//! IP address literals with the grammar of Rust's `IpAddr::from_str`, which the reference
//! uses: dotted-quad IPv4 (no leading zeros), IPv6 in its usual forms (`::`, an embedded IPv4
//! tail), no zone and no brackets.

const std = @import("std");

/// A parsed address: IPv4 in the last 4 bytes; equal addresses compare equal.
pub const Addr = struct {
    v6: bool,
    bytes: [16]u8,

    pub fn eql(a: Addr, b: Addr) bool {
        return a.v6 == b.v6 and std.mem.eql(u8, &a.bytes, &b.bytes);
    }
};

pub fn parse(s: []const u8) ?Addr {
    var r: Reader = .{ .s = s };
    if (r.ipv4()) |v4| {
        if (r.i == s.len) {
            var b: [16]u8 = @splat(0);
            @memcpy(b[12..], &v4);
            return .{ .v6 = false, .bytes = b };
        }
    }
    r = .{ .s = s };
    if (r.ipv6()) |groups| {
        if (r.i == s.len) {
            var b: [16]u8 = undefined;
            for (groups, 0..) |g, k| std.mem.writeInt(u16, b[2 * k ..][0..2], g, .big);
            return .{ .v6 = true, .bytes = b };
        }
    }
    return null;
}

const Reader = struct {
    s: []const u8,
    i: usize = 0,

    fn peek(r: *Reader) ?u8 {
        return if (r.i < r.s.len) r.s[r.i] else null;
    }

    fn eat(r: *Reader, c: u8) bool {
        if (r.peek() != c) return false;
        r.i += 1;
        return true;
    }

    /// At most `max_digits` digits in `radix`; null (and the cursor left alone) if none.
    fn number(r: *Reader, radix: u8, max_digits: usize, allow_zero_prefix: bool) ?u32 {
        const start = r.i;
        const leading_zero = r.peek() == '0';
        var n: u32 = 0;
        var count: usize = 0;
        while (r.peek()) |c| {
            const d = std.fmt.charToDigit(c, radix) catch break;
            r.i += 1;
            n = n * radix + d;
            count += 1;
            if (count > max_digits) {
                r.i = start;
                return null;
            }
        }
        if (count == 0 or (!allow_zero_prefix and leading_zero and count > 1)) {
            r.i = start;
            return null;
        }
        return n;
    }

    fn ipv4(r: *Reader) ?[4]u8 {
        const start = r.i;
        var out: [4]u8 = undefined;
        for (0..4) |k| {
            if (k > 0 and !r.eat('.')) {
                r.i = start;
                return null;
            }
            const n = r.number(10, 3, false) orelse {
                r.i = start;
                return null;
            };
            if (n > 255) {
                r.i = start;
                return null;
            }
            out[k] = @intCast(n);
        }
        return out;
    }

    /// Reads up to `limit` colon-separated groups (an IPv4 tail counts as two); returns how
    /// many, and whether it ended with an IPv4 tail.
    fn groups(r: *Reader, out: []u16, limit: usize) struct { usize, bool } {
        var k: usize = 0;
        while (k < limit) : (k += 1) {
            if (k < limit - 1) {
                const start = r.i;
                if (k == 0 or r.eat(':')) {
                    if (r.ipv4()) |v4| {
                        out[k] = @as(u16, v4[0]) << 8 | v4[1];
                        out[k + 1] = @as(u16, v4[2]) << 8 | v4[3];
                        return .{ k + 2, true };
                    }
                }
                r.i = start;
            }
            const start = r.i;
            if (k > 0 and !r.eat(':')) return .{ k, false };
            const g = r.number(16, 4, true) orelse {
                r.i = start;
                return .{ k, false };
            };
            out[k] = @intCast(g);
        }
        return .{ limit, false };
    }

    fn ipv6(r: *Reader) ?[8]u16 {
        var head: [8]u16 = undefined;
        const head_size, const v4_tail = r.groups(&head, 8);
        if (head_size == 8) return head;
        if (v4_tail) return null;
        if (!r.eat(':') or !r.eat(':')) return null;
        var tail: [8]u16 = undefined;
        const tail_size, _ = r.groups(&tail, 8 - (head_size + 1));
        var out: [8]u16 = @splat(0);
        @memcpy(out[0..head_size], head[0..head_size]);
        @memcpy(out[8 - tail_size ..], tail[0..tail_size]);
        return out;
    }
};
