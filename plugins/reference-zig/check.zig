//! Value checks the schema cannot express. Each returns what is wrong, or null when the value
//! is fine; the caller names the document and field (Document.expect).

const std = @import("std");
const text = @import("text.zig");
const regex = @import("regex.zig");
const ip = @import("ip.zig");

/// What Envoy's `retry_on` accepts for HTTP routes (gRPC conditions included).
pub const http_retry_on = [_][]const u8{
    "5xx",                    "gateway-error",     "reset",                      "reset-before-request",
    "connect-failure",        "envoy-ratelimited", "retriable-4xx",              "refused-stream",
    "retriable-status-codes", "retriable-headers", "http3-post-connect-failure", "cancelled",
    "deadline-exceeded",      "internal",          "resource-exhausted",         "unavailable",
};

const A = std.mem.Allocator;

fn msg(a: A, comptime fmt: []const u8, args: anytype) ?[]const u8 {
    return std.fmt.allocPrint(a, fmt, args) catch "out of memory";
}

/// A reference to another document's name (a Service): the rules the host applies to names.
pub fn name(a: A, s: []const u8) ?[]const u8 {
    if (s.len == 0) return "must not be empty";
    if (s.len > 253) return msg(a, "{s} is longer than 253 characters", .{text.debug(a, s)});
    for (s) |c| {
        if (!(std.ascii.isAlphanumeric(c) or c == '-' or c == '.' or c == '_'))
            return msg(a, "{s} may contain only letters, digits, '-', '.' and '_'", .{text.debug(a, s)});
    }
    return null;
}

/// Listener and EDS endpoint addresses are IP literals: Envoy does not resolve them.
pub fn ipAddress(a: A, address: []const u8) ?[]const u8 {
    if (ip.parse(address) == null) return msg(a, "{s} is not an IP address (Envoy does not resolve names here)", .{text.debug(a, address)});
    return null;
}

/// A weight in a split or a locality: at least 1.
pub fn weight(w: u64) ?[]const u8 {
    return if (w == 0) "must be at least 1 (remove the entry to send it nothing)" else null;
}

/// A count that must be at least 1 (health check thresholds).
pub fn atLeastOne(n: u64) ?[]const u8 {
    return if (n == 0) "must be at least 1" else null;
}

pub fn positive(nanos: u128) ?[]const u8 {
    return if (nanos == 0) "must be longer than 0s" else null;
}

/// A virtual host domain: `example.com`, `example.com:8080`, `*`, or one wildcard at either
/// end (`*.example.com`, `example.*`).
pub fn domain(a: A, d: []const u8) ?[]const u8 {
    if (d.len == 0) return "must not be empty";
    var it = std.unicode.Utf8View.initUnchecked(d).iterator();
    while (it.nextCodepoint()) |c| {
        if (text.isWhitespace(c) or text.isControl(c) or c == '/') return msg(a, "{s} is not a hostname", .{text.debug(a, d)});
    }
    const stars = std.mem.count(u8, d, "*");
    if (stars > 1 or (stars == 1 and d[0] != '*' and d[d.len - 1] != '*'))
        return msg(a, "{s}: a wildcard must be the first or last character, once (*.example.com)", .{text.debug(a, d)});
    return null;
}

fn isTokenChar(c: u8) bool {
    return std.ascii.isAlphanumeric(c) or std.mem.indexOfScalar(u8, "!#$%&'*+-.^_`|~", c) != null;
}

/// A header name in a matcher (pseudo-headers such as `:method` allowed) or in a mutation
/// (`mutation`: Envoy refuses to add or remove pseudo-headers and `host`).
pub fn headerName(a: A, n: []const u8, mutation: bool) ?[]const u8 {
    const token = if (std.mem.startsWith(u8, n, ":")) n[1..] else n;
    var ok = token.len > 0;
    for (token) |c| ok = ok and isTokenChar(c);
    if (!ok) return msg(a, "{s} is not a valid header name", .{text.debug(a, n)});
    if (mutation and (std.mem.startsWith(u8, n, ":") or std.ascii.eqlIgnoreCase(n, "host")))
        return msg(a, "{s} cannot be changed here (pseudo-headers and host are off limits)", .{text.debug(a, n)});
    return null;
}

pub fn headerValue(v: []const u8) ?[]const u8 {
    if (std.mem.indexOfAny(u8, v, "\r\n\x00") != null) return "must not contain CR, LF or NUL";
    return null;
}

/// A path prefix or exact path: starts with `/`.
pub fn path(a: A, p: []const u8) ?[]const u8 {
    if (std.mem.startsWith(u8, p, "/")) return null;
    return msg(a, "{s} must start with '/'", .{text.debug(a, p)});
}

/// RE2 syntax, as the Rust reference checks it with `regex-syntax`.
pub fn regexSyntax(a: A, re: []const u8) ?[]const u8 {
    if (re.len == 0) return "must not be empty";
    const why = regex.check(a, re) orelse return null;
    return msg(a, "invalid regex {s}: {s}", .{ text.debug(a, re), why });
}

/// Normalises a comma-separated `retry_on` list (items trimmed) and checks each condition
/// against `allowed`; on failure sets `problem`.
pub fn retryOn(a: A, on: []const u8, allowed: []const []const u8, problem: *?[]const u8) []const u8 {
    var out: std.ArrayList(u8) = .empty;
    var it = std.mem.splitScalar(u8, on, ',');
    while (it.next()) |item| {
        const condition = text.trim(item);
        for (allowed) |x| {
            if (std.mem.eql(u8, x, condition)) break;
        } else {
            const list = std.mem.join(a, ", ", allowed) catch "";
            problem.* = msg(a, "unknown retry condition {s} (one of: {s})", .{ text.debug(a, condition), list });
            return "";
        }
        if (out.items.len > 0) out.append(a, ',') catch {};
        out.appendSlice(a, condition) catch {};
    }
    return out.items;
}
