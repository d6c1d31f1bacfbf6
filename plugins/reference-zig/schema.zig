//! Reading intent `spec`s the way the Rust reference does with serde: `decode` walks a JSON
//! value into a Zig type and, on failure, records the field path and serde's message. Structs
//! refuse unknown fields and check keys in the order written, then missing fields in
//! declaration order, as serde does. A field of type `?T` is optional (absent or null), a field
//! with a default may be left out, any other field is required; a type with `decodeJson`
//! reads itself. Struct names in messages are the Rust ones (the Zig type's name).

const std = @import("std");
const xdst = @import("xdst");
const text = @import("text.zig");

const Value = xdst.Value;

/// A field path: segments (names and list indexes) from the innermost out.
pub const Path = struct {
    up: ?*const Path = null,
    name: []const u8 = "",
    index: ?usize = null,

    pub fn field(up: *const Path, name: []const u8) Path {
        return .{ .up = up, .name = name };
    }

    pub fn item(up: *const Path, i: usize) Path {
        return .{ .up = up, .index = i };
    }

    /// `spec.hosts[0].routes[1]`.
    pub fn format(p: *const Path, arena: std.mem.Allocator) []const u8 {
        var segments: [64]*const Path = undefined;
        var n: usize = 0;
        var at: ?*const Path = p;
        while (at) |s| : (at = s.up) {
            if (n == segments.len) break;
            segments[n] = s;
            n += 1;
        }
        var out: std.ArrayList(u8) = .empty;
        while (n > 0) {
            n -= 1;
            const s = segments[n];
            if (s.index) |i| {
                out.print(arena, "[{d}]", .{i}) catch {};
            } else {
                if (s.up != null) out.append(arena, '.') catch {};
                out.appendSlice(arena, s.name) catch {};
            }
        }
        return out.items;
    }
};

/// Where decoding failed, and why in serde's words.
pub const Failure = struct {
    arena: std.mem.Allocator,
    field: []const u8 = "",
    message: []const u8 = "",

    pub fn fail(f: *Failure, p: *const Path, comptime fmt: []const u8, args: anytype) error{Schema} {
        f.field = p.format(f.arena);
        f.message = std.fmt.allocPrint(f.arena, fmt, args) catch "out of memory";
        return error.Schema;
    }

    /// `invalid type: integer `5`, expected a string`.
    pub fn invalidType(f: *Failure, v: Value, p: *const Path, expected: []const u8) error{Schema} {
        return f.fail(p, "invalid type: {s}, expected {s}", .{ unexpected(f.arena, v), expected });
    }
};

pub const Error = error{Schema};

/// Names a value as serde_json does: integer `5`, string "x", map.
pub fn unexpected(arena: std.mem.Allocator, v: Value) []const u8 {
    return switch (v) {
        .null => "null",
        .bool => |b| if (b) "boolean `true`" else "boolean `false`",
        .string => |s| std.fmt.allocPrint(arena, "string {s}", .{text.debug(arena, s)}) catch "string",
        .integer => |n| std.fmt.allocPrint(arena, "integer `{s}`", .{n}) catch "integer",
        .float => |n| std.fmt.allocPrint(arena, "floating point `{s}`", .{formatFloat(arena, n)}) catch "floating point",
        .array => "sequence",
        .object => "map",
    };
}

/// A float as Rust displays it, with `.0` when it has no fraction.
fn formatFloat(arena: std.mem.Allocator, written: []const u8) []const u8 {
    const x = std.fmt.parseFloat(f64, written) catch return written;
    const s = std.fmt.allocPrint(arena, "{d}", .{x}) catch return written;
    if (std.mem.indexOfAny(u8, s, ".einIN") == null) return std.mem.concat(arena, u8, &.{ s, ".0" }) catch s;
    return s;
}

/// `a`; `a` or `b`; one of `a`, `b`, `c`.
pub fn oneOf(arena: std.mem.Allocator, names: []const []const u8) []const u8 {
    var out: std.ArrayList(u8) = .empty;
    if (names.len > 2) out.appendSlice(arena, "one of ") catch {};
    for (names, 0..) |n, i| {
        if (i > 0) out.appendSlice(arena, if (names.len == 2) " or " else ", ") catch {};
        out.print(arena, "`{s}`", .{n}) catch {};
    }
    return out.items;
}

/// The last component of a type's name: `specs.EndpointSpec` is `EndpointSpec`.
fn rustName(comptime T: type) []const u8 {
    const full = @typeName(T);
    const dot = comptime std.mem.lastIndexOfScalar(u8, full, '.');
    return if (dot) |d| full[d + 1 ..] else full;
}

/// An unsigned integer of type T (serde's `u16`, `u32`).
pub fn unsigned(comptime T: type, f: *Failure, v: Value, p: *const Path, expected: []const u8) Error!T {
    if (v != .integer) return f.invalidType(v, p, expected);
    const n = std.fmt.parseInt(T, v.integer, 10) catch
        return f.fail(p, "invalid value: integer `{s}`, expected {s}", .{ v.integer, expected });
    return n;
}

/// A map with string keys: entries in code point order of the keys, the last of a repeated
/// key winning.
pub const StrMap = struct {
    entries: []const Entry = &.{},

    pub const Entry = struct { key: []const u8, value: []const u8 };

    pub fn decodeJson(f: *Failure, v: Value, p: *const Path) Error!StrMap {
        if (v != .object) return f.invalidType(v, p, "a map");
        var list: std.ArrayList(Entry) = .empty;
        list.ensureTotalCapacity(f.arena, v.object.len) catch return f.fail(p, "out of memory", .{});
        for (v.object) |m| {
            const at = p.field(m.key);
            const s = try decode([]const u8, f, m.value, &at);
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

/// Decodes `v` (at path `p`) as a `T`.
pub fn decode(comptime T: type, f: *Failure, v: Value, p: *const Path) Error!T {
    switch (@typeInfo(T)) {
        .bool => return if (v == .bool) v.bool else f.invalidType(v, p, "a boolean"),
        .int => return unsigned(T, f, v, p, @typeName(T)),
        .@"enum" => |info| return decodeEnum(T, info.field_names, f, v, p),
        .pointer => |info| {
            if (info.child == u8) return if (v == .string) v.string else f.invalidType(v, p, "a string");
            if (v != .array) return f.invalidType(v, p, "a sequence");
            const out = f.arena.alloc(info.child, v.array.len) catch return f.fail(p, "out of memory", .{});
            for (v.array, 0..) |x, i| {
                const at = p.item(i);
                out[i] = try decode(info.child, f, x, &at);
            }
            return out;
        },
        .@"struct" => {
            if (@hasDecl(T, "decodeJson")) return T.decodeJson(f, v, p);
            return decodeStruct(T, f, v, p);
        },
        else => @compileError("schema: cannot decode " ++ @typeName(T)),
    }
}

/// A unit-only Rust enum: a string, or (as serde_json reads it too) `{variant: null}`.
fn decodeEnum(comptime T: type, comptime names: []const [:0]const u8, f: *Failure, v: Value, p: *const Path) Error!T {
    const variant, const value = switch (v) {
        .string => |s| .{ s, @as(?Value, null) },
        .object => |m| if (m.len == 0) return f.fail(p, "expected value", .{}) else .{ m[0].key, @as(?Value, m[0].value) },
        else => return f.fail(p, "expected value", .{}),
    };
    const found = std.meta.stringToEnum(T, variant) orelse {
        const list: []const []const u8 = comptime blk: {
            var l: [names.len][]const u8 = undefined;
            for (names, 0..) |n, i| l[i] = n;
            const final = l;
            break :blk &final;
        };
        return f.fail(p, "unknown variant `{s}`, expected {s}", .{ variant, oneOf(f.arena, list) });
    };
    if (value) |x| {
        if (x != .null) {
            const at = p.field(variant);
            return f.invalidType(x, &at, "unit");
        }
        if (v.object.len > 1) return f.fail(p, "expected value", .{});
    }
    return found;
}

const FieldKind = enum { required, optional, with_default };

fn fieldKind(comptime T: type, comptime i: usize) FieldKind {
    const info = @typeInfo(T).@"struct";
    if (@typeInfo(info.field_types[i]) == .optional) return .optional;
    if (info.field_attrs[i].default_value_ptr != null) return .with_default;
    return .required;
}

fn decodeStruct(comptime T: type, f: *Failure, v: Value, p: *const Path) Error!T {
    const info = @typeInfo(T).@"struct";
    const names = info.field_names;
    if (v == .array) return decodeStructFromSeq(T, f, v.array, p);
    if (v != .object) return f.invalidType(v, p, "struct " ++ comptime rustName(T));
    var out: T = undefined;
    var seen: [names.len]bool = @splat(false);
    for (v.object) |m| {
        const i = inline for (names, 0..) |name, i| {
            if (std.mem.eql(u8, m.key, name)) break i;
        } else {
            const at = p.field(m.key);
            if (names.len == 0) return f.fail(&at, "unknown field `{s}`, there are no fields", .{m.key});
            const list: []const []const u8 = comptime blk: {
                var l: [names.len][]const u8 = undefined;
                for (names, 0..) |n, i| l[i] = n;
                const final = l;
                break :blk &final;
            };
            return f.fail(&at, "unknown field `{s}`, expected {s}", .{ m.key, oneOf(f.arena, list) });
        };
        if (seen[i]) return f.fail(p, "duplicate field `{s}`", .{m.key});
        seen[i] = true;
        const at = p.field(m.key);
        inline for (names, info.field_types, 0..) |name, FT, j| {
            if (j == i) {
                if (comptime fieldKind(T, j) == .optional) {
                    @field(out, name) = if (m.value == .null) null else try decode(@typeInfo(FT).optional.child, f, m.value, &at);
                } else {
                    @field(out, name) = try decode(FT, f, m.value, &at);
                }
            }
        }
    }
    inline for (names, info.field_types, 0..) |name, FT, j| {
        if (!seen[j]) switch (comptime fieldKind(T, j)) {
            .required => return f.fail(p, "missing field `{s}`", .{name}),
            .optional => @field(out, name) = null,
            .with_default => @field(out, name) = info.field_attrs[j].defaultValue(FT).?,
        };
    }
    return out;
}

/// serde also reads a struct from a list of its fields' values, in declaration order.
fn decodeStructFromSeq(comptime T: type, f: *Failure, items: []const Value, p: *const Path) Error!T {
    const info = @typeInfo(T).@"struct";
    var out: T = undefined;
    inline for (info.field_names, info.field_types, 0..) |name, FT, i| {
        if (i >= items.len) {
            if (comptime fieldKind(T, i) != .with_default)
                return f.fail(p, "invalid length {d}, expected struct {s} with {d} elements", .{ i, comptime rustName(T), info.field_names.len });
            @field(out, name) = info.field_attrs[i].defaultValue(FT).?;
        } else {
            const at = p.item(i);
            if (comptime fieldKind(T, i) == .optional) {
                @field(out, name) = if (items[i] == .null) null else try decode(@typeInfo(FT).optional.child, f, items[i], &at);
            } else {
                @field(out, name) = try decode(FT, f, items[i], &at);
            }
        }
    }
    if (items.len > info.field_names.len) return f.fail(p, "trailing characters", .{});
    return out;
}
