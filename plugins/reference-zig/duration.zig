//! Durations as people write them (`250ms`, `1s`, `1.5s`, `1m30s`, `2h`), held as nanoseconds
//! (u128: the largest protobuf Duration does not fit 64 bits of nanoseconds), and written as
//! protobuf JSON Durations (`"0.250s"`).

const std = @import("std");
const xdst = @import("xdst");
const text = @import("text.zig");

/// The largest duration protobuf can carry.
const max_seconds: u128 = 315_576_000_000;
const billion: u128 = 1_000_000_000;

/// A duration field of a spec.
pub const Dur = struct {
    nanos: u128,

    pub fn decodeJson(dec: *xdst.Decoder, v: xdst.Value, at: *const xdst.Path) xdst.DecodeFailed!Dur {
        if (v != .string) return dec.invalidType(v, at, "a duration string such as 250ms, 1s or 1m30s");
        var why: []const u8 = undefined;
        const nanos = parse(v.string, &why) orelse
            return dec.fail(at, "invalid duration {s}: {s}; write for example 250ms, 1s or 1m30s", .{ text.debug(dec.arena, v.string), why });
        return .{ .nanos = nanos };
    }

    /// `"5s"`, `"0.250s"`, `"1.000000001s"`.
    pub fn format(d: Dur, arena: std.mem.Allocator) []const u8 {
        const seconds = d.nanos / billion;
        const rest: u32 = @intCast(d.nanos % billion);
        if (rest == 0) return std.fmt.allocPrint(arena, "{d}s", .{seconds}) catch "0s";
        var fraction: [9]u8 = undefined;
        _ = std.fmt.bufPrint(&fraction, "{d:0>9}", .{rest}) catch unreachable;
        var len: usize = 9;
        while (len > 3 and std.mem.eql(u8, fraction[len - 3 .. len], "000")) len -= 3;
        return std.fmt.allocPrint(arena, "{d}.{s}s", .{ seconds, fraction[0..len] }) catch "0s";
    }
};

fn isNumberChar(c: u8) bool {
    return (c >= '0' and c <= '9') or c == '.';
}

fn unitNanos(unit: []const u8) ?u128 {
    const units = [_]struct { []const u8, u128 }{
        .{ "h", 3_600_000_000_000 }, .{ "m", 60_000_000_000 }, .{ "s", 1_000_000_000 },
        .{ "ms", 1_000_000 },        .{ "us", 1_000 },
        .{ "µs", 1_000 },
        .{ "ns", 1 },
    };
    for (units) |u| if (std.mem.eql(u8, u[0], unit)) return u[1];
    return null;
}

/// Reads one or more `<number><unit>` terms into nanoseconds; on failure sets `why`.
pub fn parse(s: []const u8, why: *[]const u8) ?u128 {
    if (s.len == 0) return bad(why, "empty");
    if (s[0] == '-') return bad(why, "must not be negative");
    var total: u128 = 0;
    var rest = s;
    while (rest.len > 0) {
        var digits: usize = 0;
        while (digits < rest.len and isNumberChar(rest[digits])) digits += 1;
        if (digits == 0) return bad(why, "expected a number");
        const num = rest[0..digits];
        var after = rest[digits..];
        var unit_len: usize = 0;
        while (unit_len < after.len and !isNumberChar(after[unit_len])) unit_len += 1;
        const unit = after[0..unit_len];
        after = after[unit_len..];
        if (unit.len == 0) return bad(why, "missing unit (h, m, s, ms, us or ns)");
        const per = unitNanos(unit) orelse return bad(why, "unknown unit (use h, m, s, ms, us or ns)");
        const dot = std.mem.indexOfScalar(u8, num, '.');
        const whole = if (dot) |d| num[0..d] else num;
        const fraction = if (dot) |d| num[d + 1 ..] else "";
        if ((whole.len == 0 and fraction.len == 0) or std.mem.indexOfScalar(u8, fraction, '.') != null)
            return bad(why, "malformed number");
        const w: u128 = if (whole.len == 0) 0 else std.fmt.parseInt(u128, whole, 10) catch return bad(why, "too large");
        var term = std.math.mul(u128, w, per) catch return bad(why, "too large");
        // Digits of the fraction past nanosecond precision are dropped.
        var scale = per;
        for (fraction) |c| {
            scale /= 10;
            term += (c - '0') * scale;
        }
        total = std.math.add(u128, total, term) catch return bad(why, "too large");
        if (total / billion > max_seconds) return bad(why, "too large");
        rest = after;
    }
    return total;
}

fn bad(why: *[]const u8, reason: []const u8) ?u128 {
    why.* = reason;
    return null;
}
