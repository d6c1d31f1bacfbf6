//! The intent schema of the two kinds this port translates, field by field, as in
//! plugins/reference/src/schema.rs. Field names are the JSON (camelCase) names, in the Rust
//! declaration order; `?T` is an `Option`, a default is `#[serde(default)]`. Checks a schema
//! cannot express are in service.zig, gateway.zig and routing.zig.

const std = @import("std");
const xdst = @import("xdst");
const Dur = @import("duration.zig").Dur;

/// A TCP port, 1 to 65535.
pub const Port = struct {
    n: u16,

    pub fn decodeJson(dec: *xdst.Decoder, v: xdst.Value, at: *const xdst.Path) xdst.DecodeFailed!Port {
        const expected = "a port number from 1 to 65535";
        if (v != .integer) return dec.invalidType(v, at, expected);
        const n = v.int(u16) orelse 0;
        if (n == 0) return dec.fail(at, "invalid value: integer `{s}`, expected {s}", .{ v.integer, expected });
        return .{ .n = n };
    }
};

/// A map with string keys (Rust's `BTreeMap<String, String>`): entries in code point order of
/// the keys, the last of a repeated key winning.
pub const StrMap = struct {
    entries: []const Entry = &.{},

    pub const Entry = struct { key: []const u8, value: []const u8 };

    pub fn decodeJson(dec: *xdst.Decoder, v: xdst.Value, at: *const xdst.Path) xdst.DecodeFailed!StrMap {
        if (v != .object) return dec.invalidType(v, at, "a map");
        var list: std.ArrayList(Entry) = .empty;
        list.ensureTotalCapacity(dec.arena, v.object.len) catch return dec.fail(at, "out of memory", .{});
        for (v.object) |m| {
            const p = at.field(m.key);
            const s = try dec.decode([]const u8, m.value, &p);
            for (list.items) |*e| {
                if (std.mem.eql(u8, e.key, m.key)) {
                    e.value = s;
                    break;
                }
            } else list.appendAssumeCapacity(.{ .key = m.key, .value = s });
        }
        // Byte order of UTF-8 is code point order.
        std.mem.sort(Entry, list.items, {}, struct {
            fn less(_: void, a: Entry, b: Entry) bool {
                return std.mem.lessThan(u8, a.key, b.key);
            }
        }.less);
        return .{ .entries = list.items };
    }
};

pub const Protocol = enum { http1, http2, grpc };
pub const LoadBalancing = enum { roundRobin, leastRequest, random, ringHash, maglev };

pub const EndpointSpec = struct {
    address: []const u8,
    port: Port,
    weight: ?u32,
};

pub const LocalitySpec = struct {
    region: []const u8 = "",
    zone: []const u8 = "",
    subZone: []const u8 = "",
    weight: ?u32,
    priority: u32 = 0,
    endpoints: []const EndpointSpec = &.{},
};

pub const GrpcHealthCheckSpec = struct {
    serviceName: []const u8 = "",
};

pub const HealthCheckSpec = struct {
    path: ?[]const u8,
    host: ?[]const u8,
    grpc: ?GrpcHealthCheckSpec,
    interval: ?Dur,
    timeout: ?Dur,
    healthyThreshold: ?u32,
    unhealthyThreshold: ?u32,
};

pub const CircuitBreakersSpec = struct {
    maxConnections: ?u32,
    maxPendingRequests: ?u32,
    maxRequests: ?u32,
    maxRetries: ?u32,
};

/// `kind: Service`: an upstream service and its endpoints.
pub const ServiceSpec = struct {
    protocol: Protocol = .http1,
    loadBalancing: LoadBalancing = .roundRobin,
    connectTimeout: ?Dur,
    endpoints: []const EndpointSpec = &.{},
    localities: []const LocalitySpec = &.{},
    healthCheck: ?HealthCheckSpec,
    circuitBreakers: ?CircuitBreakersSpec,
};

pub const HeaderMatchSpec = struct {
    name: []const u8,
    exact: ?[]const u8,
    prefix: ?[]const u8,
    regex: ?[]const u8,
    present: ?bool,
    invert: bool = false,
};

pub const MatchSpec = struct {
    pathPrefix: ?[]const u8 = null,
    path: ?[]const u8 = null,
    regex: ?[]const u8 = null,
    headers: []const HeaderMatchSpec = &.{},
};

pub const BackendSpec = struct {
    service: []const u8,
    weight: ?u32,
};

pub const DirectResponseSpec = struct {
    status: u16,
    body: ?[]const u8,
};

pub const RetriesSpec = struct {
    attempts: ?u32,
    on: ?[]const u8,
    perTryTimeout: ?Dur,
    statusCodes: []const u16 = &.{},
};

pub const HeadersSpec = struct {
    /// Replace the header's value (or add it).
    set: StrMap = .{},
    /// Add a value, keeping any the header has.
    add: StrMap = .{},
    remove: []const []const u8 = &.{},
};

pub const RewriteSpec = struct {
    pathPrefix: []const u8,
};

pub const HttpRouteSpec = struct {
    name: ?[]const u8,
    match: ?MatchSpec,
    backends: ?[]const BackendSpec,
    directResponse: ?DirectResponseSpec,
    timeout: ?Dur,
    idleTimeout: ?Dur,
    retries: ?RetriesSpec,
    requestHeaders: ?HeadersSpec,
    responseHeaders: ?HeadersSpec,
    rewrite: ?RewriteSpec,
};

pub const HostSpec = struct {
    name: ?[]const u8,
    hostnames: ?[]const []const u8,
    routes: []const HttpRouteSpec,
    requestHeaders: ?HeadersSpec,
    responseHeaders: ?HeadersSpec,
};

/// `kind: HttpGateway`: an Envoy listener and its routes.
pub const GatewaySpec = struct {
    address: ?[]const u8,
    port: Port,
    hosts: []const HostSpec,
};

/// The operator's configuration for this plugin: none, so `null` or `{}`.
pub const Config = struct {};
