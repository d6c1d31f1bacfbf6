//! reference-zig: the reference translator (plugins/reference) in Zig, built for
//! wasm32-freestanding with the Zig SDK (guest-sdk/zig). It translates `Service` and
//! `HttpGateway` exactly as the Rust plugin does: the same schema, the same checks in the same
//! order, the same resources.

const std = @import("std");
const xdst = @import("xdst");
const specs = @import("specs.zig");
const text = @import("text.zig");
const service = @import("service.zig");
const gateway = @import("gateway.zig");
const Document = @import("document.zig").Document;

const plugin_name = "reference-zig";

/// The kinds, in the Rust original's order.
const kinds = [_][]const u8{ "Service", "HttpGateway" };

pub const info: xdst.PluginInfo = .{
    .name = plugin_name,
    .version = "0.1.0",
    .kinds = &kinds,
    .phase = .translate,
    .granularity = .per_document,
};

pub fn translate(req: *const xdst.Request, out: *xdst.Response) xdst.Error!void {
    try checkConfig(req, out);
    try out.resources.ensureTotalCapacity(req.arena, req.documents.len * 2);
    for (req.documents) |d| {
        const doc: Document = .{ .src = d, .out = out, .arena = req.arena };
        if (std.mem.eql(u8, d.kind, "Service")) {
            try service.translate(&doc, out);
        } else if (std.mem.eql(u8, d.kind, "HttpGateway")) {
            try gateway.translate(&doc, out);
        } else {
            return doc.failHere("the {s} plugin does not translate kind {s} (it translates {s})", .{
                plugin_name, text.debug(req.arena, d.kind), "Service, HttpGateway",
            });
        }
    }
}

/// The plugin takes no configuration: `null` or `{}`.
fn checkConfig(req: *const xdst.Request, out: *xdst.Response) xdst.Error!void {
    if (req.config == .null) return;
    var err: xdst.DecodeError = .{};
    _ = xdst.decodeValue(req.arena, specs.Config, req.config, "", &err) catch
        return out.fail(null, null, "plugin configuration: {s} (the {s} plugin takes none)", .{ err.message, plugin_name });
}

comptime {
    xdst.exportPlugin(@This());
}
