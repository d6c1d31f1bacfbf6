//! `Service` -> an EDS Cluster and its ClusterLoadAssignment, both named after the document.

const std = @import("std");
const xdst = @import("xdst");
const specs = @import("specs.zig");
const check = @import("check.zig");
const envoy = @import("envoy.zig");
const ip = @import("ip.zig");
const Document = @import("document.zig").Document;
const Error = xdst.Error;

pub fn translate(doc: *const Document, out: *xdst.Response) Error!void {
    const a = doc.arena;
    const spec = try doc.spec(specs.ServiceSpec);
    const http2 = spec.protocol == .http2 or spec.protocol == .grpc;

    var cluster: envoy.Cluster = .{ .name = doc.name(), .lb_policy = switch (spec.loadBalancing) {
        .roundRobin => "ROUND_ROBIN",
        .leastRequest => "LEAST_REQUEST",
        .random => "RANDOM",
        .ringHash => "RING_HASH",
        .maglev => "MAGLEV",
    } };
    if (spec.connectTimeout) |t| {
        try doc.expect(check.positive(t.nanos), "spec.connectTimeout", .{});
        cluster.connect_timeout = t.format(a);
    }
    if (http2) cluster.http2_protocol_options = .{};
    // Locality weights mean the same to Envoy as to gRPC clients.
    if (spec.localities.len > 0) cluster.common_lb_config = .{};
    if (spec.healthCheck) |hc| cluster.health_checks = try a.dupe(envoy.HealthCheck, &.{try healthCheck(doc, hc, http2)});
    if (spec.circuitBreakers) |cb| cluster.circuit_breakers = .{ .thresholds = try a.dupe(envoy.Thresholds, &.{.{
        .max_connections = cb.maxConnections,
        .max_pending_requests = cb.maxPendingRequests,
        .max_requests = cb.maxRequests,
        .max_retries = cb.maxRetries,
    }}) };
    const endpoints = try loadAssignment(doc, spec.endpoints, spec.localities);
    try out.add(envoy.cluster_type, doc.name(), doc.id(), cluster);
    try out.add(envoy.load_assignment_type, doc.name(), doc.id(), endpoints);
}

const Seen = std.ArrayList(struct { ip.Addr, u16 });

fn loadAssignment(doc: *const Document, endpoints: []const specs.EndpointSpec, localities: []const specs.LocalitySpec) Error!envoy.ClusterLoadAssignment {
    const a = doc.arena;
    if (endpoints.len > 0 and localities.len > 0)
        return doc.fail("spec.localities", "put endpoints either in spec.endpoints or in spec.localities, not both", .{});
    var seen: Seen = .empty;
    var groups: std.ArrayList(envoy.LocalityLbEndpoints) = .empty;
    var count = endpoints.len;
    if (endpoints.len > 0) {
        const lb = try a.alloc(envoy.LbEndpoint, endpoints.len);
        for (endpoints, 0..) |e, i| lb[i] = try endpoint(doc, e, &seen, "spec.endpoints[{d}]", .{i});
        try groups.append(a, .{ .locality = .{ .region = "", .zone = "", .sub_zone = "" }, .load_balancing_weight = 1, .priority = 0, .lb_endpoints = lb });
    }
    var priorities: std.ArrayList(u32) = .empty;
    for (localities, 0..) |loc, l| {
        for (localities[0..l]) |other| {
            if (std.mem.eql(u8, other.region, loc.region) and std.mem.eql(u8, other.zone, loc.zone) and std.mem.eql(u8, other.subZone, loc.subZone))
                return doc.fail(try doc.print("spec.localities[{d}]", .{l}), "another locality has the same region, zone and subZone", .{});
        }
        const weight = loc.weight orelse 1;
        try doc.expect(check.weight(weight), "spec.localities[{d}].weight", .{l});
        if (std.mem.indexOfScalar(u32, priorities.items, loc.priority) == null) try priorities.append(a, loc.priority);
        count += loc.endpoints.len;
        const lb = try a.alloc(envoy.LbEndpoint, loc.endpoints.len);
        for (loc.endpoints, 0..) |e, i| lb[i] = try endpoint(doc, e, &seen, "spec.localities[{d}].endpoints[{d}]", .{ l, i });
        try groups.append(a, .{ .locality = .{ .region = loc.region, .zone = loc.zone, .sub_zone = loc.subZone }, .load_balancing_weight = weight, .priority = loc.priority, .lb_endpoints = lb });
    }
    // Priorities must run 0, 1, 2, ... without gaps.
    std.mem.sort(u32, priorities.items, {}, std.sort.asc(u32));
    for (priorities.items, 0..) |p, i| {
        if (p != i) {
            const missing = i;
            var at: usize = 0;
            for (localities, 0..) |loc, j| {
                if (loc.priority > missing) {
                    at = j;
                    break;
                }
            }
            return doc.fail(try doc.print("spec.localities[{d}].priority", .{at}), "priorities must run 0, 1, 2, ... without gaps, and no locality has priority {d}", .{missing});
        }
    }
    if (count == 0) try doc.warn("spec.endpoints", "no endpoints: requests to this service fail until it has some");
    return .{ .cluster_name = doc.name(), .endpoints = groups.items };
}

fn endpoint(doc: *const Document, e: specs.EndpointSpec, seen: *Seen, comptime at: []const u8, args: anytype) Error!envoy.LbEndpoint {
    try doc.expect(check.ipAddress(doc.arena, e.address), at ++ ".address", args);
    const addr = ip.parse(e.address).?;
    for (seen.items) |s| {
        if (s[0].eql(addr) and s[1] == e.port.n)
            return doc.fail(try doc.print(at, args), "{s}:{d} is listed twice", .{ e.address, e.port.n });
    }
    try seen.append(doc.arena, .{ addr, e.port.n });
    if (e.weight) |w| try doc.expect(check.weight(w), at ++ ".weight", args);
    return .{ .endpoint = .{ .address = envoy.SocketAddress.of(e.address, e.port.n) }, .load_balancing_weight = e.weight };
}

fn healthCheck(doc: *const Document, spec: specs.HealthCheckSpec, http2: bool) Error!envoy.HealthCheck {
    const a = doc.arena;
    const at = "spec.healthCheck";
    var hc: envoy.HealthCheck = .{};
    if (spec.path != null and spec.grpc == null) {
        try doc.expect(check.path(a, spec.path.?), at ++ ".path", .{});
        if (spec.host) |host| try doc.expect(check.domain(a, host), at ++ ".host", .{});
        hc.http_health_check = .{ .path = spec.path.?, .codec_client_type = if (http2) "HTTP2" else null, .host = spec.host };
    } else if (spec.path == null and spec.grpc != null) {
        if (!http2) return doc.fail(at ++ ".grpc", "gRPC health checks need protocol http2 or grpc", .{});
        if (spec.host != null) return doc.fail(at ++ ".host", "applies to HTTP checks (path) only", .{});
        hc.grpc_health_check = .{ .service_name = spec.grpc.?.serviceName };
    } else {
        return doc.fail(at, "set path (an HTTP check) or grpc (the gRPC health checking protocol), one of them", .{});
    }
    if (spec.interval) |v| {
        try doc.expect(check.positive(v.nanos), at ++ ".interval", .{});
        hc.interval = v.format(a);
    }
    if (spec.timeout) |v| {
        try doc.expect(check.positive(v.nanos), at ++ ".timeout", .{});
        hc.timeout = v.format(a);
    }
    if (spec.healthyThreshold) |n| {
        try doc.expect(check.atLeastOne(n), at ++ ".healthyThreshold", .{});
        hc.healthy_threshold = n;
    }
    if (spec.unhealthyThreshold) |n| {
        try doc.expect(check.atLeastOne(n), at ++ ".unhealthyThreshold", .{});
        hc.unhealthy_threshold = n;
    }
    return hc;
}
