//! What HttpGateway routes are made of: matches, backends, header mutation.

const std = @import("std");
const xdst = @import("xdst");
const specs = @import("specs.zig");
const check = @import("check.zig");
const envoy = @import("envoy.zig");
const text = @import("text.zig");
const Document = @import("document.zig").Document;
const Error = xdst.Error;

/// A route's match: one of pathPrefix, path or regex (default `pathPrefix: /`), and header
/// matchers. `at` is the route's field path. Also says whether it matched a regex.
pub fn routeMatch(doc: *const Document, spec: ?specs.MatchSpec, at: []const u8) Error!struct { envoy.RouteMatch, bool } {
    const a = doc.arena;
    const m = spec orelse specs.MatchSpec{};
    const set = @as(u8, @intFromBool(m.pathPrefix != null)) + @intFromBool(m.path != null) + @intFromBool(m.regex != null);
    if (set > 1) return doc.fail(try doc.print("{s}.match", .{at}), "set one of pathPrefix, path or regex, not several", .{});
    var match: envoy.RouteMatch = .{};
    if (m.pathPrefix) |prefix| {
        try doc.expect(check.path(a, prefix), "{s}.match.pathPrefix", .{at});
        match.prefix = prefix;
    } else if (m.path) |path| {
        try doc.expect(check.path(a, path), "{s}.match.path", .{at});
        match.path = path;
    } else if (m.regex) |re| {
        try doc.expect(check.regexSyntax(a, re), "{s}.match.regex", .{at});
        match.safe_regex = .{ .regex = re };
    } else {
        match.prefix = "/";
    }
    if (m.headers.len > 0) {
        const headers = try a.alloc(envoy.HeaderMatcher, m.headers.len);
        for (m.headers, 0..) |h, i| headers[i] = try headerMatch(doc, h, try doc.print("{s}.match.headers[{d}]", .{ at, i }));
        match.headers = headers;
    }
    return .{ match, m.regex != null };
}

fn headerMatch(doc: *const Document, h: specs.HeaderMatchSpec, at: []const u8) Error!envoy.HeaderMatcher {
    const a = doc.arena;
    try doc.expect(check.headerName(a, h.name, false), "{s}.name", .{at});
    const set = @as(u8, @intFromBool(h.exact != null)) + @intFromBool(h.prefix != null) + @intFromBool(h.regex != null) + @intFromBool(h.present != null);
    if (set != 1) return doc.fail(at, "set exactly one of exact, prefix, regex or present", .{});
    var invert = h.invert;
    var out: envoy.HeaderMatcher = .{ .name = h.name };
    if (h.exact) |v| {
        try doc.expect(check.headerValue(v), "{s}.exact", .{at});
        out.string_match = .{ .exact = v };
    } else if (h.prefix) |v| {
        try doc.expect(check.headerValue(v), "{s}.prefix", .{at});
        out.string_match = .{ .prefix = v };
    } else if (h.regex) |re| {
        try doc.expect(check.regexSyntax(a, re), "{s}.regex", .{at});
        out.string_match = .{ .safe_regex = .{ .regex = re } };
    } else {
        // `present: false` matches requests without the header.
        invert = invert != (h.present.? == false);
        out.present_match = true;
    }
    if (invert) out.invert_match = true;
    return out;
}

/// Checks a backends list: not empty, valid service names listed once, weights at least 1.
/// `at` is the path of the list.
pub fn checkBackends(doc: *const Document, backends: []const specs.BackendSpec, at: []const u8) Error!void {
    const a = doc.arena;
    if (backends.len == 0) return doc.fail(at, "list at least one backend service", .{});
    var total: u64 = 0;
    for (backends, 0..) |b, i| {
        try doc.expect(check.name(a, b.service), "{s}[{d}].service", .{ at, i });
        if (backends.len > 1) {
            for (backends[0..i]) |other| {
                if (std.mem.eql(u8, other.service, b.service))
                    return doc.fail(try doc.print("{s}[{d}].service", .{ at, i }), "{s} is listed twice", .{text.debug(a, b.service)});
            }
        }
        const weight = b.weight orelse 1;
        try doc.expect(check.weight(weight), "{s}[{d}].weight", .{ at, i });
        total += weight;
    }
    if (total > std.math.maxInt(u32)) return doc.fail(at, "the weights add up to more than 4294967295", .{});
}

/// Checks `backends` and sends the route to them: one backend is a plain cluster, several a
/// weighted split. `at` is the path of the list.
pub fn toBackends(doc: *const Document, backends: []const specs.BackendSpec, at: []const u8) Error!envoy.RouteAction {
    try checkBackends(doc, backends, at);
    if (backends.len == 1) return .{ .cluster = backends[0].service };
    const clusters = try doc.arena.alloc(envoy.WeightedCluster, backends.len);
    for (backends, 0..) |b, i| clusters[i] = .{ .name = b.service, .weight = b.weight orelse 1 };
    return .{ .weighted_clusters = .{ .clusters = clusters } };
}

/// Applies `requestHeaders` (`request`) or `responseHeaders` to a route or virtual host: set,
/// then add (each in name order), then remove. `at` is the path of the headers block.
pub fn mutate(doc: *const Document, target: anytype, spec: ?specs.HeadersSpec, comptime request: bool, at: []const u8) Error!void {
    const h = spec orelse return;
    const a = doc.arena;
    const side = if (request) "request" else "response";
    var add: std.ArrayList(envoy.HeaderValueOption) = .empty;
    if (@field(target, side ++ "_headers_to_add")) |existing| try add.appendSlice(a, existing);
    for (h.set.entries) |e| {
        try doc.expect(check.headerName(a, e.key, true), "{s}.set", .{at});
        try doc.expect(check.headerValue(e.value), "{s}.set.{s}", .{ at, e.key });
        try add.append(a, envoy.HeaderValueOption.of(e.key, e.value, true));
    }
    for (h.add.entries) |e| {
        try doc.expect(check.headerName(a, e.key, true), "{s}.add", .{at});
        try doc.expect(check.headerValue(e.value), "{s}.add.{s}", .{ at, e.key });
        try add.append(a, envoy.HeaderValueOption.of(e.key, e.value, false));
    }
    for (h.remove, 0..) |name, i| try doc.expect(check.headerName(a, name, true), "{s}.remove[{d}]", .{ at, i });
    if (add.items.len > 0) @field(target, side ++ "_headers_to_add") = add.items;
    if (h.remove.len > 0) {
        var remove: std.ArrayList([]const u8) = .empty;
        if (@field(target, side ++ "_headers_to_remove")) |existing| try remove.appendSlice(a, existing);
        try remove.appendSlice(a, h.remove);
        @field(target, side ++ "_headers_to_remove") = remove.items;
    }
}
