//! {{name}}: an xdst translation plugin in Zig.
//!
//! Translates `{{kind}}` documents
//!
//!     kind: {{kind}}
//!     metadata: {name: web}
//!     spec: {address: 10.0.0.1, port: 8080}
//!
//! into one STATIC Envoy Cluster named after the document. It is built with
//! `zig build-exe -target wasm32-freestanding -fno-entry -rdynamic` and speaks xdst's
//! core-module ABI through the SDK (sdk/xdst.zig, imported as the module `xdst`).

const std = @import("std");
const xdst = @import("xdst");

const kind = "{{kind}}";
const cluster_type = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// What xdst_describe returns.
pub const info: xdst.PluginInfo = .{
    .name = "{{name}}",
    .version = "0.1.0",
    .kinds = &.{kind},
    .phase = .translate,
    .granularity = .per_document,
};

/// The document, as written: `d.decode` refuses fields it does not have, and fields of the
/// wrong type, naming the field (`spec.port`); a `?T` field may be left out or null.
const Document = struct {
    kind: []const u8,
    metadata: struct { name: []const u8 },
    spec: ?struct {
        address: ?[]const u8 = null,
        port: ?i64 = null,
    } = null,
};

/// Called by the SDK for every translate request.
pub fn translate(req: *const xdst.Request, out: *xdst.Response) xdst.Error!void {
    for (req.documents) |d| {
        const id = d.id();
        var err: xdst.DecodeError = .{};
        const doc = d.decode(req.arena, Document, &err) catch return out.failDecode(id, err);
        const spec = doc.spec orelse return out.fail(id, "spec", "missing: {{address, port}}", .{});
        const address = spec.address orelse "";
        if (address.len == 0) return out.fail(id, "spec.address", "missing: an IP address such as 10.0.0.1", .{});
        const port = spec.port orelse 0;
        if (port < 1 or port > 65535) return out.fail(id, "spec.port", "must be a port number from 1 to 65535", .{});

        // Envoy's proto3 JSON: an anonymous struct is written with its field names as keys.
        const endpoint = .{ .endpoint = .{ .address = .{ .socket_address = .{ .address = address, .port_value = port } } } };
        try out.add(cluster_type, d.name, id, .{
            .name = d.name,
            .type = "STATIC",
            .load_assignment = .{
                .cluster_name = d.name,
                .endpoints = .{.{ .lb_endpoints = .{endpoint} }},
            },
        });
    }
    xdst.log(.debug, "translated {d} documents", .{req.documents.len});
}

comptime {
    xdst.exportPlugin(@This());
}
