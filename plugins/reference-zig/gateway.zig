//! `HttpGateway` -> a Listener (RDS over ADS) and its RouteConfiguration, both named after the
//! document.

const std = @import("std");
const xdst = @import("xdst");
const specs = @import("specs.zig");
const check = @import("check.zig");
const envoy = @import("envoy.zig");
const text = @import("text.zig");
const routing = @import("routing.zig");
const Document = @import("document.zig").Document;
const Error = xdst.Error;

const default_retry_on = "5xx,connect-failure,reset";

pub fn translate(doc: *const Document, out: *xdst.Response) Error!void {
    const a = doc.arena;
    const spec = try doc.spec(specs.GatewaySpec);
    const address = spec.address orelse "0.0.0.0";
    try doc.expect(check.ipAddress(a, address), "spec.address", .{});
    if (spec.hosts.len == 0) return doc.fail("spec.hosts", "list at least one host", .{});

    var domains: std.StringHashMapUnmanaged(void) = .empty;
    var names: std.StringHashMapUnmanaged(void) = .empty;
    const vhosts = try a.alloc(envoy.VirtualHost, spec.hosts.len);
    for (spec.hosts, 0..) |host, h| {
        const at = try doc.print("spec.hosts[{d}]", .{h});
        const hostnames: []const []const u8 = host.hostnames orelse &.{"*"};
        if (hostnames.len == 0)
            return doc.fail(try doc.print("{s}.hostnames", .{at}), "list at least one hostname (or leave hostnames out to match any)", .{});
        for (hostnames, 0..) |d, i| {
            try doc.expect(check.domain(a, d), "{s}.hostnames[{d}]", .{ at, i });
            const gop = try domains.getOrPut(a, text.asciiLower(a, d));
            if (gop.found_existing)
                return doc.fail(try doc.print("{s}.hostnames[{d}]", .{ at, i }), "{s} is listed more than once in this gateway", .{text.debug(a, d)});
        }
        if (host.name) |n| try doc.expect(check.name(a, n), "{s}.name", .{at});
        const name = host.name orelse hostnames[0];
        if ((try names.getOrPut(a, name)).found_existing)
            return doc.fail(try doc.print("{s}.name", .{at}), "another host is already named {s}", .{text.debug(a, name)});
        if (host.routes.len == 0) return doc.fail(try doc.print("{s}.routes", .{at}), "list at least one route", .{});
        var vhost: envoy.VirtualHost = .{ .name = name, .domains = hostnames };
        try routing.mutate(doc, &vhost, host.requestHeaders, true, try doc.print("{s}.requestHeaders", .{at}));
        try routing.mutate(doc, &vhost, host.responseHeaders, false, try doc.print("{s}.responseHeaders", .{at}));
        const routes = try a.alloc(envoy.Route, host.routes.len);
        for (host.routes, 0..) |route, r| routes[r] = try httpRoute(doc, route, try doc.print("{s}.routes[{d}]", .{ at, r }));
        vhost.routes = routes;
        vhosts[h] = vhost;
    }
    try out.add(envoy.listener_type, doc.name(), doc.id(), envoy.Listener.http(doc.name(), address, spec.port.n));
    try out.add(envoy.route_config_type, doc.name(), doc.id(), envoy.RouteConfiguration{ .name = doc.name(), .virtual_hosts = vhosts });
}

fn httpRoute(doc: *const Document, spec: specs.HttpRouteSpec, at: []const u8) Error!envoy.Route {
    const a = doc.arena;
    const match, const is_regex = try routing.routeMatch(doc, spec.match, at);
    var route: envoy.Route = .{ .match = match, .name = spec.name };
    if (spec.backends != null and spec.directResponse != null)
        return doc.fail(try doc.print("{s}.directResponse", .{at}), "set backends or directResponse, not both", .{});
    if (spec.backends == null and spec.directResponse == null)
        return doc.fail(try doc.print("{s}.backends", .{at}), "missing: the services to send requests to (or a directResponse)", .{});
    if (spec.backends) |backends| {
        var action = try routing.toBackends(doc, backends, try doc.print("{s}.backends", .{at}));
        if (spec.timeout) |t| action.timeout = t.format(a);
        if (spec.idleTimeout) |t| action.idle_timeout = t.format(a);
        if (spec.retries) |r| action.retry_policy = try httpRetries(doc, r, try doc.print("{s}.retries", .{at}));
        if (spec.rewrite) |rw| {
            if (is_regex) return doc.fail(try doc.print("{s}.rewrite.pathPrefix", .{at}), "needs a pathPrefix or path match, not a regex", .{});
            try doc.expect(check.path(a, rw.pathPrefix), "{s}.rewrite.pathPrefix", .{at});
            action.prefix_rewrite = rw.pathPrefix;
        }
        route.route = action;
    } else {
        const d = spec.directResponse.?;
        if (d.status < 200 or d.status > 599)
            return doc.fail(try doc.print("{s}.directResponse.status", .{at}), "must be an HTTP status between 200 and 599", .{});
        if (spec.timeout != null or spec.idleTimeout != null or spec.retries != null or spec.rewrite != null)
            return doc.fail(try doc.print("{s}.directResponse", .{at}), "timeout, idleTimeout, retries and rewrite apply to backends, not to a directResponse", .{});
        route.direct_response = .{ .status = d.status, .body = if (d.body) |b| .{ .inline_string = b } else null };
    }
    try routing.mutate(doc, &route, spec.requestHeaders, true, try doc.print("{s}.requestHeaders", .{at}));
    try routing.mutate(doc, &route, spec.responseHeaders, false, try doc.print("{s}.responseHeaders", .{at}));
    return route;
}

fn httpRetries(doc: *const Document, spec: specs.RetriesSpec, at: []const u8) Error!envoy.RetryPolicy {
    const a = doc.arena;
    const attempts = spec.attempts orelse 1;
    if (attempts == 0) return doc.fail(try doc.print("{s}.attempts", .{at}), "must be at least 1 (leave retries out for none)", .{});
    var problem: ?[]const u8 = null;
    var on = check.retryOn(a, spec.on orelse default_retry_on, &check.http_retry_on, &problem);
    try doc.expect(problem, "{s}.on", .{at});
    for (spec.statusCodes, 0..) |code, i| {
        if (code < 100 or code > 599)
            return doc.fail(try doc.print("{s}.statusCodes[{d}]", .{ at, i }), "must be an HTTP status between 100 and 599", .{});
    }
    if (spec.statusCodes.len > 0) {
        var it = std.mem.splitScalar(u8, on, ',');
        const has = while (it.next()) |c| {
            if (std.mem.eql(u8, c, "retriable-status-codes")) break true;
        } else false;
        if (!has) on = try std.mem.concat(a, u8, &.{ on, ",retriable-status-codes" });
    }
    var policy: envoy.RetryPolicy = .{ .retry_on = on, .num_retries = attempts };
    if (spec.perTryTimeout) |t| {
        try doc.expect(check.positive(t.nanos), "{s}.perTryTimeout", .{at});
        policy.per_try_timeout = t.format(a);
    }
    if (spec.statusCodes.len > 0) policy.retriable_status_codes = spec.statusCodes;
    return policy;
}
