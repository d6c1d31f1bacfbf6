//! Intent documents as the plugin reads them, and the errors and warnings that name them
//! (`Kind/name`) and the field at fault.

const std = @import("std");
const xdst = @import("xdst");

pub const Error = xdst.Error;

pub const Document = struct {
    src: xdst.Document,
    out: *xdst.Response,
    arena: std.mem.Allocator,

    pub fn name(d: *const Document) []const u8 {
        return d.src.name;
    }

    pub fn id(d: *const Document) []const u8 {
        return d.src.id();
    }

    /// Reads `spec` as a `T` (an absent or null spec reads as `{}`).
    pub fn spec(d: *const Document, comptime T: type) Error!T {
        const root = d.src.json;
        if (root != .object) return d.failHere("the document is not a JSON object", .{});
        var count: usize = 0;
        for (root.object) |m| {
            if (std.mem.eql(u8, m.key, "spec")) count += 1;
        }
        if (count > 1) return d.failHere("duplicate field `spec`", .{});
        var value = root.get("spec") orelse .null;
        if (value == .null) value = .{ .object = &.{} };
        var err: xdst.DecodeError = .{};
        return xdst.decodeValue(d.arena, T, value, "spec", &err) catch d.out.failDecode(d.id(), err);
    }

    /// A plugin error about `field`: `return d.fail(...)`.
    pub fn fail(d: *const Document, field: []const u8, comptime fmt: []const u8, args: anytype) Error {
        return d.out.fail(d.id(), field, fmt, args);
    }

    /// A plugin error about the document as a whole.
    pub fn failHere(d: *const Document, comptime fmt: []const u8, args: anytype) Error {
        return d.out.fail(d.id(), null, fmt, args);
    }

    /// Fails with an error about `field` if a check found a problem (`field` is only built then).
    pub fn expect(d: *const Document, problem: ?[]const u8, comptime field_fmt: []const u8, args: anytype) Error!void {
        const message = problem orelse return;
        const field = try std.fmt.allocPrint(d.arena, field_fmt, args);
        return d.fail(field, "{s}", .{message});
    }

    /// A warning about `field`, ending with the document's origin.
    pub fn warn(d: *const Document, field: []const u8, message: []const u8) Error!void {
        if (d.src.origin.len == 0) return d.out.warn(d.id(), field, "{s}", .{message});
        return d.out.warn(d.id(), field, "{s} ({s})", .{ message, d.src.origin });
    }

    /// Formats with the document's arena.
    pub fn print(d: *const Document, comptime fmt: []const u8, args: anytype) Error![]const u8 {
        return std.fmt.allocPrint(d.arena, fmt, args);
    }
};
