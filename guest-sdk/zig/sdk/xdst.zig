//! xdst: the Zig SDK for xdst plugins. A plugin is a WebAssembly core module built with
//! `zig build-exe -target wasm32-freestanding -fno-entry -rdynamic` that speaks xdst's
//! core-module ABI (proto/core-abi/README.md in the xdst repository): JSON through linear
//! memory. `exportPlugin` exports the ABI's functions for the plugin's root file, which
//! declares
//!
//!     pub const info: xdst.PluginInfo = .{ .name = "my-plugin", .version = "0.1.0", .kinds = &.{"Backend"} };
//!     pub fn translate(req: *const xdst.Request, out: *xdst.Response) !void { ... }
//!     comptime { xdst.exportPlugin(@This()); }
//!
//! It uses the standard library only. The module imports nothing but `xdst.log` (and that only
//! when the plugin logs): no WASI, so no files, clock, environment or random numbers.
//!
//! Every call gets a fresh instance, so memory is never freed: `Request.arena` (and every
//! allocation the SDK makes) bumps through linear memory and the host drops it all afterwards.

const std = @import("std");

/// The phase a plugin runs in: translate plugins turn intent into resources; patch plugins then
/// change what translate plugins produced.
pub const Phase = enum { translate, patch };

/// What a call is given: per-document plugins get the documents that changed; whole-set plugins
/// get every document of their kinds.
pub const Granularity = enum {
    per_document,
    whole_set,

    fn text(g: Granularity) []const u8 {
        return switch (g) {
            .per_document => "per-document",
            .whole_set => "whole-set",
        };
    }
};

/// What `xdst_describe` returns: the plugin's `pub const info`.
pub const PluginInfo = struct {
    name: []const u8,
    version: []const u8,
    kinds: []const []const u8,
    phase: Phase = .translate,
    granularity: Granularity = .per_document,
};

/// A failure the plugin reports (`Response.fail`), or the arena running out of memory.
pub const Error = error{ PluginFailed, OutOfMemory };

// --- JSON values -----------------------------------------------------------------------------

/// One member of a JSON object.
pub const Member = struct { key: []const u8, value: Value };

/// A JSON value as written: object members in the order written (repeated keys kept), numbers
/// as their text, integers apart from floats as serde_json tells them apart (an integer is
/// written without `.`, `e` or `E` and fits an i64 or a u64; `-0` is a float).
pub const Value = union(enum) {
    null,
    bool: bool,
    /// An integer as written; read it with `int`.
    integer: []const u8,
    /// Any other number as written; read it with `number`.
    float: []const u8,
    string: []const u8,
    array: []const Value,
    object: []const Member,

    /// The value of the last member named `key` of an object; null if there is none, or if
    /// this is not an object.
    pub fn get(v: Value, key: []const u8) ?Value {
        if (v != .object) return null;
        var i = v.object.len;
        while (i > 0) {
            i -= 1;
            if (std.mem.eql(u8, v.object[i].key, key)) return v.object[i].value;
        }
        return null;
    }

    /// The text of a string; null for anything else.
    pub fn str(v: Value) ?[]const u8 {
        return if (v == .string) v.string else null;
    }

    /// An integer that fits `T`; null for anything else (a float, a string, out of range).
    pub fn int(v: Value, comptime T: type) ?T {
        if (v != .integer) return null;
        return std.fmt.parseInt(T, v.integer, 10) catch null;
    }

    /// Any number as an f64; null for anything else.
    pub fn number(v: Value) ?f64 {
        return switch (v) {
            .integer, .float => |text| std.fmt.parseFloat(f64, text) catch null,
            else => null,
        };
    }

    /// Parses `text` (one JSON value) with `arena`.
    pub fn parse(arena: std.mem.Allocator, text: []const u8) !Value {
        var s = std.json.Scanner.initCompleteInput(arena, text);
        const v = try readValue(&s, arena);
        if (try s.next() != .end_of_document) return error.SyntaxError;
        return v;
    }

    /// Writes the value back as JSON (std.json.Stringify calls this).
    pub fn jsonStringify(v: Value, jws: anytype) !void {
        switch (v) {
            .null => try jws.write(null),
            .bool => |b| try jws.write(b),
            .integer, .float => |text| try jws.print("{s}", .{text}),
            .string => |s| try jws.write(s),
            .array => |items| {
                try jws.beginArray();
                for (items) |item| try jws.write(item);
                try jws.endArray();
            },
            .object => |members| {
                try jws.beginObject();
                for (members) |m| {
                    try jws.objectField(m.key);
                    try jws.write(m.value);
                }
                try jws.endObject();
            },
        }
    }
};

const Scanner = std.json.Scanner;

fn nextToken(s: *Scanner, arena: std.mem.Allocator) !std.json.Token {
    return s.nextAllocMax(arena, .alloc_if_needed, s.input.len);
}

fn readValue(s: *Scanner, arena: std.mem.Allocator) anyerror!Value {
    return valueFrom(s, arena, try nextToken(s, arena));
}

fn valueFrom(s: *Scanner, arena: std.mem.Allocator, token: std.json.Token) anyerror!Value {
    switch (token) {
        .null => return .null,
        .true => return .{ .bool = true },
        .false => return .{ .bool = false },
        .string, .allocated_string => |text| return .{ .string = text },
        .number, .allocated_number => |text| return numberValue(text),
        .array_begin => {
            var items: std.ArrayList(Value) = .empty;
            while (true) {
                const t = try nextToken(s, arena);
                if (t == .array_end) break;
                try items.append(arena, try valueFrom(s, arena, t));
            }
            return .{ .array = items.items };
        },
        .object_begin => {
            var members: std.ArrayList(Member) = .empty;
            while (true) {
                const key = switch (try nextToken(s, arena)) {
                    .object_end => break,
                    .string, .allocated_string => |k| k,
                    else => return error.SyntaxError,
                };
                try members.append(arena, .{ .key = key, .value = try readValue(s, arena) });
            }
            return .{ .object = members.items };
        },
        else => return error.SyntaxError,
    }
}

fn numberValue(text: []const u8) Value {
    if (std.mem.indexOfAny(u8, text, ".eE") == null) {
        if (text[0] == '-') {
            const i = std.fmt.parseInt(i64, text, 10) catch return .{ .float = text };
            if (i != 0) return .{ .integer = text };
        } else {
            _ = std.fmt.parseInt(u64, text, 10) catch return .{ .float = text };
            return .{ .integer = text };
        }
    }
    return .{ .float = text };
}

// --- the request -----------------------------------------------------------------------------

/// One intent document: kind, name (`namespace/name` for a namespaced one), where it came
/// from, and the document itself.
pub const Document = struct {
    kind: []const u8 = "",
    name: []const u8 = "",
    origin: []const u8 = "",
    /// The whole document, parsed.
    json: Value = .null,
    /// The whole document as JSON text (to parse it another way, such as with std.json).
    raw: []const u8 = "null",
    full_id: []const u8 = "",

    /// `Kind/name`: what errors, diagnostics and resources name.
    pub fn id(d: Document) []const u8 {
        return d.full_id;
    }

    /// Reads the whole document into a `T` (see `decodeValue`; `T` needs `kind`, `metadata` and
    /// `spec`, as unknown fields are refused). On failure `err` says at which field (a path from
    /// the document's root, such as `spec.port`) and why; `out.failDecode(d.id(), err)` makes it
    /// the plugin's error:
    ///
    ///     var err: xdst.DecodeError = .{};
    ///     const doc = d.decode(req.arena, Doc, &err) catch return out.failDecode(d.id(), err);
    pub fn decode(d: Document, arena: std.mem.Allocator, comptime T: type, err: *DecodeError) DecodeFailed!T {
        return decodeValue(arena, T, d.json, "", err);
    }
};

/// A resource's message: Envoy's canonical proto3 JSON (as JSON text), or protobuf bytes.
pub const Body = union(enum) {
    json: []const u8,
    proto: []const u8,
};

/// One Envoy resource.
pub const Resource = struct {
    type_url: []const u8,
    name: []const u8,
    /// The id (`Kind/name`) of the document it was made from, if any.
    document: ?[]const u8 = null,
    body: Body,
};

/// What `translate` is given.
pub const Request = struct {
    /// An arena for the whole call: allocate freely, never free.
    arena: std.mem.Allocator,
    node_group: []const u8 = "",
    documents: []const Document = &.{},
    /// For patch plugins: the resources translated so far.
    resources: []const Resource = &.{},
    /// The operator's configuration for the plugin; `.null` when there is none.
    config: Value = .null,
};

// --- the response ----------------------------------------------------------------------------

pub const Severity = enum { info, warning };

/// Something the operator should see that does not stop the translation.
pub const Diagnostic = struct {
    severity: Severity,
    message: []const u8,
    document: ?[]const u8 = null,
    field: ?[]const u8 = null,
};

/// An empty JSON object, `{}`, for messages given to `Response.add`: an empty literal `.{}` is
/// an empty tuple, which std.json writes as `[]`.
pub const empty = struct {}{};

/// A plugin error: it fails the generation, names the document and field, and the last good
/// configuration keeps serving.
pub const Failure = struct {
    message: []const u8,
    document: ?[]const u8 = null,
    field: ?[]const u8 = null,
};

/// What `translate` fills in.
pub const Response = struct {
    arena: std.mem.Allocator,
    resources: std.ArrayList(Resource) = .empty,
    diagnostics: std.ArrayList(Diagnostic) = .empty,
    failure: ?Failure = null,

    /// Adds a resource of type `type_url` named `name`, made from `document` (its id, or
    /// null), with `message` as its proto3 JSON: a struct (anonymous or not; null optional
    /// fields are left out), a `Value`, or anything else std.json.Stringify writes.
    pub fn add(out: *Response, type_url: []const u8, name: []const u8, document: ?[]const u8, message: anytype) Error!void {
        const body = try std.json.Stringify.valueAlloc(out.arena, message, .{ .emit_null_optional_fields = false });
        try out.resources.append(out.arena, .{ .type_url = type_url, .name = name, .document = document, .body = .{ .json = body } });
    }

    /// Adds a resource built by hand (a `.proto` body, or JSON text already written).
    pub fn addResource(out: *Response, r: Resource) Error!void {
        try out.resources.append(out.arena, r);
    }

    /// Adds a warning about `document` (its id, or null) at `field` (or null).
    pub fn warn(out: *Response, document: ?[]const u8, field: ?[]const u8, comptime fmt: []const u8, args: anytype) Error!void {
        try out.diagnostic(.warning, document, field, fmt, args);
    }

    /// Adds a diagnostic of either severity.
    pub fn diagnostic(out: *Response, severity: Severity, document: ?[]const u8, field: ?[]const u8, comptime fmt: []const u8, args: anytype) Error!void {
        const message = try std.fmt.allocPrint(out.arena, fmt, args);
        try out.diagnostics.append(out.arena, .{ .severity = severity, .message = message, .document = document, .field = field });
    }

    /// Records a plugin error about `document` (its id, or null) at `field` (a path such as
    /// `spec.port`, or null) and returns `error.PluginFailed`: `return out.fail(...)`.
    pub fn fail(out: *Response, document: ?[]const u8, field: ?[]const u8, comptime fmt: []const u8, args: anytype) Error {
        const message = std.fmt.allocPrint(out.arena, fmt, args) catch return error.OutOfMemory;
        out.failure = .{ .message = message, .document = document, .field = field };
        return error.PluginFailed;
    }

    /// Records the plugin error a failed `decode` described: about `document` (its id, or
    /// null), at the field `err` names (none when the decoded value itself is at fault, with no
    /// prefix), with its message. Returns `error.PluginFailed`: `return out.failDecode(id, err)`.
    pub fn failDecode(out: *Response, document: ?[]const u8, err: DecodeError) Error {
        out.failure = .{ .message = err.message, .document = document, .field = if (err.field.len == 0) null else err.field };
        return error.PluginFailed;
    }
};

// --- decoding --------------------------------------------------------------------------------

/// Why `decodeValue` (or `Document.decode`) failed: where, and why in words. Give it to
/// `Response.failDecode` to make it the plugin's error.
pub const DecodeError = struct {
    /// The path of the value at fault, such as `spec.port` or `spec.endpoints[1].weight`
    /// (the prefix, then fields and list indexes); empty for the decoded value itself when
    /// there is no prefix.
    field: []const u8 = "",
    /// Why, in serde's words (so a Zig plugin says what a Rust plugin would), such as
    ///     invalid type: string "x", expected i64
    ///     unknown field `adress`, expected `address` or `port`
    ///     missing field `name`
    message: []const u8 = "",
};

/// What decoding returns when it fails; the `DecodeError` given to it says where and why (an
/// allocation failure included: `out of memory`).
pub const DecodeFailed = error{DecodeFailed};

/// Reads `v` into a `T`, walking `T`'s declaration at comptime as serde reads a Rust struct:
///
/// - a struct is a JSON object: unknown keys are errors, keys are read in the order written
///   (a key given twice is an error), then fields not given: a `?T` field is null, a field
///   with a default value takes it, any other is missing (an error). As serde does, a struct
///   may also be written as a list of its fields' values in declaration order;
/// - `?T` is null or a `T`; `[]const u8` a string; `[]const T` a list; `bool` a boolean; an
///   integer type an integer that fits it; a float type any number; an enum the name of one
///   of its tags, as a string; `xdst.Value` any JSON value, kept as it is;
/// - a struct, enum or union declaring
///   `pub fn decodeJson(dec: *xdst.Decoder, v: xdst.Value, at: *const xdst.Path) xdst.DecodeFailed!Self`
///   reads itself: `dec.decode(U, part, &p)` reads a part (at `p = at.field(name)` or
///   `at.item(i)`), `return dec.fail(at, fmt, args)` or
///   `return dec.invalidType(v, at, "a duration")` reports an error.
///
/// `prefix` is the path of `v` itself, which every field path starts with: "" for a whole
/// document (paths such as `spec.port`), `"spec"` for a document's `spec`. On failure `err`
/// says at which field and why; slices in the result point into `v` or `arena`.
pub fn decodeValue(arena: std.mem.Allocator, comptime T: type, v: Value, prefix: []const u8, err: *DecodeError) DecodeFailed!T {
    var dec: Decoder = .{ .arena = arena, .err = err };
    const root: Path = .{ .name = prefix };
    return dec.decode(T, v, &root);
}

/// The path of a value being decoded: a list of segments (field names and list indexes) from
/// the innermost out, each on the stack of the call decoding it.
pub const Path = struct {
    up: ?*const Path = null,
    name: []const u8 = "",
    index: ?usize = null,

    /// The path of field `name` of the object at `up`.
    pub fn field(up: *const Path, name: []const u8) Path {
        return .{ .up = up, .name = name };
    }

    /// The path of item `i` of the list at `up`.
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
            } else if (s.name.len > 0) {
                if (out.items.len > 0) out.append(arena, '.') catch {};
                out.appendSlice(arena, s.name) catch {};
            }
        }
        return out.items;
    }
};

/// The state of one `decodeValue`: what a type's `decodeJson` is given.
pub const Decoder = struct {
    arena: std.mem.Allocator,
    err: *DecodeError,

    /// Reads `v` (at path `at`) as a `T`: for a `decodeJson` reading its parts.
    pub fn decode(dec: *Decoder, comptime T: type, v: Value, at: *const Path) DecodeFailed!T {
        switch (@typeInfo(T)) {
            .bool => return if (v == .bool) v.bool else dec.invalidType(v, at, "a boolean"),
            .int => {
                if (v != .integer) return dec.invalidType(v, at, @typeName(T));
                return std.fmt.parseInt(T, v.integer, 10) catch
                    dec.fail(at, "invalid value: integer `{s}`, expected {s}", .{ v.integer, @typeName(T) });
            },
            .float => {
                if (v != .integer and v != .float) return dec.invalidType(v, at, @typeName(T));
                return std.fmt.parseFloat(T, if (v == .integer) v.integer else v.float) catch
                    dec.fail(at, "invalid value: expected {s}", .{@typeName(T)});
            },
            .optional => |info| return if (v == .null) null else try dec.decode(info.child, v, at),
            .@"enum" => |info| {
                if (@hasDecl(T, "decodeJson")) return T.decodeJson(dec, v, at);
                return dec.decodeEnum(T, info.field_names, v, at);
            },
            .pointer => |info| {
                if (info.size != .slice) @compileError("xdst.decodeValue: cannot decode " ++ @typeName(T) ++ " (a pointer that is not a slice)");
                if (info.child == u8) return if (v == .string) v.string else dec.invalidType(v, at, "a string");
                if (v != .array) return dec.invalidType(v, at, "a sequence");
                const out = dec.arena.alloc(info.child, v.array.len) catch return dec.fail(at, "out of memory", .{});
                for (v.array, 0..) |x, i| {
                    const p = at.item(i);
                    out[i] = try dec.decode(info.child, x, &p);
                }
                return out;
            },
            .@"struct" => {
                if (@hasDecl(T, "decodeJson")) return T.decodeJson(dec, v, at);
                return dec.decodeStruct(T, v, at);
            },
            .@"union" => {
                if (T == Value) return v;
                if (@hasDecl(T, "decodeJson")) return T.decodeJson(dec, v, at);
                @compileError("xdst.decodeValue: cannot decode the union " ++ @typeName(T) ++ ": give it a decodeJson, or read an xdst.Value");
            },
            else => @compileError("xdst.decodeValue: cannot decode " ++ @typeName(T)),
        }
    }

    /// Records why decoding failed at `at`; returns `error.DecodeFailed`: `return dec.fail(...)`.
    pub fn fail(dec: *Decoder, at: *const Path, comptime fmt: []const u8, args: anytype) DecodeFailed {
        dec.err.* = .{
            .field = at.format(dec.arena),
            .message = std.fmt.allocPrint(dec.arena, fmt, args) catch "out of memory",
        };
        return error.DecodeFailed;
    }

    /// `invalid type: integer `5`, expected a string`: `v` is not what `at` needs.
    pub fn invalidType(dec: *Decoder, v: Value, at: *const Path, expected: []const u8) DecodeFailed {
        return dec.fail(at, "invalid type: {s}, expected {s}", .{ dec.unexpected(v), expected });
    }

    /// Names a value as serde_json does: integer `5`, string "x", map.
    fn unexpected(dec: *Decoder, v: Value) []const u8 {
        const arena = dec.arena;
        return switch (v) {
            .null => "null",
            .bool => |b| if (b) "boolean `true`" else "boolean `false`",
            .string => |s| std.fmt.allocPrint(arena, "string {s}", .{quote(arena, s)}) catch "string",
            .integer => |n| std.fmt.allocPrint(arena, "integer `{s}`", .{n}) catch "integer",
            .float => |n| std.fmt.allocPrint(arena, "floating point `{s}`", .{formatFloat(arena, n)}) catch "floating point",
            .array => "sequence",
            .object => "map",
        };
    }

    /// A unit-only Rust enum: a string, or (as serde_json reads it too) `{variant: null}`.
    fn decodeEnum(dec: *Decoder, comptime T: type, comptime names: []const [:0]const u8, v: Value, at: *const Path) DecodeFailed!T {
        const variant, const value = switch (v) {
            .string => |s| .{ s, @as(?Value, null) },
            .object => |m| if (m.len == 0) return dec.fail(at, "expected value", .{}) else .{ m[0].key, @as(?Value, m[0].value) },
            else => return dec.fail(at, "expected value", .{}),
        };
        const found = std.meta.stringToEnum(T, variant) orelse
            return dec.fail(at, "unknown variant `{s}`, expected {s}", .{ variant, oneOf(dec.arena, names) });
        if (value) |x| {
            if (x != .null) {
                const p = at.field(variant);
                return dec.invalidType(x, &p, "unit");
            }
            if (v.object.len > 1) return dec.fail(at, "expected value", .{});
        }
        return found;
    }

    fn decodeStruct(dec: *Decoder, comptime T: type, v: Value, at: *const Path) DecodeFailed!T {
        const info = @typeInfo(T).@"struct";
        const names = info.field_names;
        if (v == .array) return dec.decodeStructFromSeq(T, v.array, at);
        if (v != .object) return dec.invalidType(v, at, comptime structName(T));
        var out: T = undefined;
        var seen: [names.len]bool = @splat(false);
        for (v.object) |m| {
            const i = inline for (names, 0..) |name, i| {
                if (std.mem.eql(u8, m.key, name)) break i;
            } else {
                const p = at.field(m.key);
                if (names.len == 0) return dec.fail(&p, "unknown field `{s}`, there are no fields", .{m.key});
                return dec.fail(&p, "unknown field `{s}`, expected {s}", .{ m.key, oneOf(dec.arena, names) });
            };
            if (seen[i]) return dec.fail(at, "duplicate field `{s}`", .{m.key});
            seen[i] = true;
            const p = at.field(m.key);
            inline for (names, info.field_types, 0..) |name, FT, j| {
                if (j == i) @field(out, name) = try dec.decode(FT, m.value, &p);
            }
        }
        inline for (names, info.field_types, 0..) |name, FT, j| {
            if (!seen[j]) switch (comptime fieldKind(T, j)) {
                .required => return dec.fail(at, "missing field `{s}`", .{name}),
                .optional => @field(out, name) = null,
                .with_default => @field(out, name) = info.field_attrs[j].defaultValue(FT).?,
            };
        }
        return out;
    }

    /// serde also reads a struct from a list of its fields' values, in declaration order.
    fn decodeStructFromSeq(dec: *Decoder, comptime T: type, items: []const Value, at: *const Path) DecodeFailed!T {
        const info = @typeInfo(T).@"struct";
        var out: T = undefined;
        inline for (info.field_names, info.field_types, 0..) |name, FT, i| {
            if (i >= items.len) {
                if (comptime fieldKind(T, i) != .with_default)
                    return dec.fail(at, "invalid length {d}, expected {s} with {d} elements", .{ i, comptime structName(T), info.field_names.len });
                @field(out, name) = info.field_attrs[i].defaultValue(FT).?;
            } else {
                const p = at.item(i);
                @field(out, name) = try dec.decode(FT, items[i], &p);
            }
        }
        if (items.len > info.field_names.len) return dec.fail(at, "trailing characters", .{});
        return out;
    }
};

const FieldKind = enum { required, optional, with_default };

fn fieldKind(comptime T: type, comptime i: usize) FieldKind {
    const info = @typeInfo(T).@"struct";
    if (@typeInfo(info.field_types[i]) == .optional) return .optional;
    if (info.field_attrs[i].default_value_ptr != null) return .with_default;
    return .required;
}

/// How messages name a struct, as serde names a Rust one: `struct EndpointSpec` for
/// `specs.EndpointSpec`; `a map` for an anonymous struct.
fn structName(comptime T: type) []const u8 {
    const full = @typeName(T);
    if (std.mem.indexOf(u8, full, "__struct_") != null or std.mem.indexOfScalar(u8, full, '(') != null) return "a map";
    const dot = std.mem.lastIndexOfScalar(u8, full, '.');
    return "struct " ++ if (dot) |d| full[d + 1 ..] else full;
}

/// `a`; `a` or `b`; one of `a`, `b`, `c`.
fn oneOf(arena: std.mem.Allocator, names: []const [:0]const u8) []const u8 {
    var out: std.ArrayList(u8) = .empty;
    if (names.len > 2) out.appendSlice(arena, "one of ") catch {};
    for (names, 0..) |n, i| {
        if (i > 0) out.appendSlice(arena, if (names.len == 2) " or " else ", ") catch {};
        out.print(arena, "`{s}`", .{n}) catch {};
    }
    return out.items;
}

/// A float as Rust displays it (all its digits, no exponent, `.0` when it has no fraction),
/// from the JSON text: the host writes shortest round-trip digits, as Rust does, so moving the
/// decimal point is enough (and keeps float formatting, some 50 KB, out of every module).
fn formatFloat(arena: std.mem.Allocator, written: []const u8) []const u8 {
    const negative = written.len > 0 and written[0] == '-';
    const number = written[@intFromBool(negative)..];
    const e = std.mem.indexOfAny(u8, number, "eE") orelse number.len;
    const exponent: i32 = if (e == number.len) 0 else std.fmt.parseInt(i32, number[e + 1 ..], 10) catch return written;
    const mantissa = number[0..e];
    const dot = std.mem.indexOfScalar(u8, mantissa, '.') orelse mantissa.len;
    const digits_all = std.mem.concat(arena, u8, &.{ mantissa[0..dot], mantissa[@min(dot + 1, mantissa.len)..] }) catch return written;
    // The value is 0.DIGITS * 10^point.
    var point: i64 = @as(i64, @intCast(dot)) + exponent;
    var digits: []const u8 = digits_all;
    while (digits.len > 0 and digits[0] == '0') : (point -= 1) digits = digits[1..];
    digits = std.mem.trimEnd(u8, digits, "0");
    if (digits.len == 0) return if (negative) "-0.0" else "0.0";
    if (point > 400 or point < -400) return written;
    var out: std.ArrayList(u8) = .empty;
    if (negative) out.append(arena, '-') catch return written;
    if (point <= 0) {
        out.appendSlice(arena, "0.") catch return written;
        out.appendNTimes(arena, '0', @intCast(-point)) catch return written;
        out.appendSlice(arena, digits) catch return written;
    } else if (point >= digits.len) {
        out.appendSlice(arena, digits) catch return written;
        out.appendNTimes(arena, '0', @intCast(point - @as(i64, @intCast(digits.len)))) catch return written;
        out.appendSlice(arena, ".0") catch return written;
    } else {
        const p: usize = @intCast(point);
        out.print(arena, "{s}.{s}", .{ digits[0..p], digits[p..] }) catch return written;
    }
    return out.items;
}

/// `s` quoted and escaped as Rust's `{:?}` shows a string (`"a\"b"`), as decoding messages
/// quote strings.
pub fn quote(arena: std.mem.Allocator, s: []const u8) []const u8 {
    var out: std.ArrayList(u8) = .empty;
    out.ensureTotalCapacity(arena, s.len + 2) catch return s;
    out.appendAssumeCapacity('"');
    var it = std.unicode.Utf8View.initUnchecked(s).iterator();
    while (it.nextCodepointSlice()) |bytes| {
        const c = std.unicode.utf8Decode(bytes) catch 0xfffd;
        switch (c) {
            '"' => out.appendSlice(arena, "\\\"") catch {},
            '\\' => out.appendSlice(arena, "\\\\") catch {},
            '\n' => out.appendSlice(arena, "\\n") catch {},
            '\r' => out.appendSlice(arena, "\\r") catch {},
            '\t' => out.appendSlice(arena, "\\t") catch {},
            0 => out.appendSlice(arena, "\\0") catch {},
            // Rust's char::is_control (category Cc).
            0x01...0x08, 0x0b, 0x0c, 0x0e...0x1f, 0x7f...0x9f => out.print(arena, "\\u{{{x}}}", .{c}) catch {},
            else => out.appendSlice(arena, bytes) catch {},
        }
    }
    out.append(arena, '"') catch {};
    return out.items;
}

// --- logging ---------------------------------------------------------------------------------

pub const Level = enum(i32) { debug = 0, info = 1, warn = 2, err = 3 };

const host = struct {
    extern "xdst" fn log(level: i32, ptr: [*]const u8, len: usize) void;
};

/// Writes a line to xdst's log, tagged with the plugin's name (at most 4 KiB of it; xdst
/// limits the rate and size too).
pub fn log(level: Level, comptime fmt: []const u8, args: anytype) void {
    var buf: [4096]u8 = undefined;
    var w: std.Io.Writer = .fixed(&buf);
    w.print(fmt, args) catch {};
    const text = w.buffered();
    if (text.len > 0) host.log(@backingInt(level), text.ptr, text.len);
}

// --- memory ----------------------------------------------------------------------------------

/// Bumps through linear memory, growing it as needed; frees nothing but the last allocation.
/// Every call gets a fresh instance, so this is all a plugin needs.
const Bump = struct {
    var next: usize = 0;
    var end: usize = 0;

    const vtable: std.mem.Allocator.VTable = .{ .alloc = alloc, .resize = resize, .remap = remap, .free = free };
    const allocator: std.mem.Allocator = .{ .ptr = undefined, .vtable = &vtable };
    const page = 64 * 1024;

    fn alloc(_: *anyopaque, len: usize, alignment: std.mem.Alignment, _: usize) ?[*]u8 {
        if (end == 0) {
            next = @wasmMemorySize(0) * page;
            end = next;
        }
        const start = alignment.forward(next);
        if (start + len > end) {
            if (!grow(start + len - end)) return null;
        }
        next = start + len;
        return @ptrFromInt(start);
    }

    /// Grows memory by at least `need` bytes, and by at least a quarter of its size (growing
    /// is slow in some engines); exactly `need` (in pages) if the larger step is refused.
    fn grow(need: usize) bool {
        const pages = std.math.divCeil(usize, need, page) catch return false;
        const step = @max(pages, end / page / 4);
        if (@wasmMemoryGrow(0, step) >= 0) {
            end += step * page;
            return true;
        }
        if (step == pages or @wasmMemoryGrow(0, pages) < 0) return false;
        end += pages * page;
        return true;
    }

    fn resize(_: *anyopaque, memory: []u8, _: std.mem.Alignment, new_len: usize, _: usize) bool {
        if (new_len <= memory.len) {
            if (@intFromPtr(memory.ptr) + memory.len == next) next = @intFromPtr(memory.ptr) + new_len;
            return true;
        }
        if (@intFromPtr(memory.ptr) + memory.len != next) return false;
        const start = @intFromPtr(memory.ptr);
        if (start + new_len > end) {
            if (!grow(start + new_len - end)) return false;
        }
        next = start + new_len;
        return true;
    }

    fn remap(ctx: *anyopaque, memory: []u8, alignment: std.mem.Alignment, new_len: usize, ret: usize) ?[*]u8 {
        return if (resize(ctx, memory, alignment, new_len, ret)) memory.ptr else null;
    }

    fn free(_: *anyopaque, memory: []u8, _: std.mem.Alignment, _: usize) void {
        if (@intFromPtr(memory.ptr) + memory.len == next) next = @intFromPtr(memory.ptr);
    }
};

/// The allocator behind `Request.arena`: use it anywhere in a plugin.
pub const allocator = Bump.allocator;

// --- the ABI ---------------------------------------------------------------------------------

/// Exports the ABI's functions for `Plugin`, a type (usually the root file, `@This()`) that
/// declares `pub const info: xdst.PluginInfo` and
/// `pub fn translate(req: *const xdst.Request, out: *xdst.Response) !void`:
///
///     comptime { xdst.exportPlugin(@This()); }
pub fn exportPlugin(comptime Plugin: type) void {
    if (!@hasDecl(Plugin, "info")) @compileError("the plugin must declare `pub const info: xdst.PluginInfo`");
    if (!@hasDecl(Plugin, "translate")) @compileError("the plugin must declare `pub fn translate(req: *const xdst.Request, out: *xdst.Response) !void`");
    const abi = Abi(Plugin);
    @export(&abi.marker, .{ .name = "xdst_plugin_abi_0_1_0" });
    @export(&abi.alloc, .{ .name = "xdst_alloc" });
    @export(&abi.describe, .{ .name = "xdst_describe" });
    @export(&abi.translate, .{ .name = "xdst_translate" });
}

fn Abi(comptime Plugin: type) type {
    return struct {
        fn marker() callconv(.c) void {}

        fn alloc(len: i32) callconv(.c) i32 {
            const n: usize = if (len <= 0) 1 else @intCast(len);
            const p = allocator.alignedAlloc(u8, .@"8", n) catch return 0;
            return @intCast(@intFromPtr(p.ptr));
        }

        fn describe() callconv(.c) i64 {
            const info: PluginInfo = Plugin.info;
            var w: std.Io.Writer.Allocating = .init(allocator);
            writeDescribe(&w.writer, info) catch @panic("out of memory writing plugin-info");
            return answer(w.written());
        }

        fn translate(ptr: i32, len: i32) callconv(.c) i64 {
            const p: [*]const u8 = @ptrFromInt(@as(usize, @intCast(ptr)));
            const input = p[0..@intCast(len)];
            var out: Response = .{ .arena = allocator };
            const req = readRequest(input) catch |err| {
                return failWith(.{ .message = std.fmt.allocPrint(allocator, "the request is not the ABI's JSON: {s}", .{@errorName(err)}) catch "the request is not the ABI's JSON" });
            };
            Plugin.translate(&req, &out) catch |err| switch (err) {
                error.PluginFailed => return failWith(out.failure orelse .{ .message = "the plugin failed without saying why" }),
                else => return failWith(.{ .message = std.fmt.allocPrint(allocator, "translate failed: {s}", .{@errorName(err)}) catch @errorName(err) }),
            };
            var w: std.Io.Writer.Allocating = .init(allocator);
            writeResponse(&w.writer, &out) catch @panic("out of memory writing the response");
            return answer(w.written());
        }
    };
}

fn writeDescribe(w: *std.Io.Writer, info: PluginInfo) !void {
    try w.writeAll("{\"name\":");
    try writeString(w, info.name);
    try w.writeAll(",\"version\":");
    try writeString(w, info.version);
    try w.writeAll(",\"kinds\":[");
    for (info.kinds, 0..) |k, i| {
        if (i > 0) try w.writeByte(',');
        try writeString(w, k);
    }
    try w.print("],\"phase\":\"{s}\",\"granularity\":\"{s}\"}}", .{ @tagName(info.phase), info.granularity.text() });
}

fn failWith(f: Failure) i64 {
    var w: std.Io.Writer.Allocating = .init(allocator);
    writeFailure(&w.writer, f) catch @panic("out of memory writing the error");
    return answer(w.written());
}

fn answer(b: []const u8) i64 {
    return @as(i64, @intCast(@intFromPtr(b.ptr))) << 32 | @as(i64, @intCast(b.len));
}

fn readRequest(input: []const u8) !Request {
    var s = Scanner.initCompleteInput(allocator, input);
    var req: Request = .{ .arena = allocator };
    try openObject(&s);
    while (try nextKey(&s)) |key| {
        if (std.mem.eql(u8, key, "nodeGroup")) {
            req.node_group = try readString(&s);
        } else if (std.mem.eql(u8, key, "documents")) {
            var docs: std.ArrayList(Document) = .empty;
            if (try s.next() != .array_begin) return error.SyntaxError;
            while (try s.peekNextTokenType() != .array_end) try docs.append(allocator, try readDocument(&s));
            _ = try s.next();
            req.documents = docs.items;
        } else if (std.mem.eql(u8, key, "resources")) {
            var rs: std.ArrayList(Resource) = .empty;
            if (try s.next() != .array_begin) return error.SyntaxError;
            while (try s.peekNextTokenType() != .array_end) try rs.append(allocator, try readResource(&s));
            _ = try s.next();
            req.resources = rs.items;
        } else if (std.mem.eql(u8, key, "config")) {
            req.config = try readValue(&s, allocator);
        } else {
            try s.skipValue();
        }
    }
    return req;
}

/// Reads the `{` of an object whose members the caller then reads with `nextKey`.
fn openObject(s: *Scanner) !void {
    if (try s.next() != .object_begin) return error.SyntaxError;
}

/// The next member's key of an object opened with `openObject`; null after its `}`.
fn nextKey(s: *Scanner) !?[]const u8 {
    return switch (try nextToken(s, allocator)) {
        .object_end => null,
        .string, .allocated_string => |k| k,
        else => error.SyntaxError,
    };
}

fn readString(s: *Scanner) ![]const u8 {
    return switch (try nextToken(s, allocator)) {
        .string, .allocated_string => |text| text,
        .null => "",
        else => error.SyntaxError,
    };
}

/// Reads one value, returning its JSON text (for `raw`) and the parsed value.
fn readRaw(s: *Scanner) !struct { []const u8, Value } {
    const start = s.cursor;
    const v = try readValue(s, allocator);
    const text = std.mem.trim(u8, s.input[start..s.cursor], " \t\r\n:");
    return .{ text, v };
}

fn readDocument(s: *Scanner) !Document {
    var d: Document = .{};
    try openObject(s);
    while (try nextKey(s)) |key| {
        if (std.mem.eql(u8, key, "kind")) {
            d.kind = try readString(s);
        } else if (std.mem.eql(u8, key, "name")) {
            d.name = try readString(s);
        } else if (std.mem.eql(u8, key, "origin")) {
            d.origin = try readString(s);
        } else if (std.mem.eql(u8, key, "json")) {
            d.raw, d.json = try readRaw(s);
        } else {
            try s.skipValue();
        }
    }
    d.full_id = try std.mem.concat(allocator, u8, &.{ d.kind, "/", d.name });
    return d;
}

fn readResource(s: *Scanner) !Resource {
    var r: Resource = .{ .type_url = "", .name = "", .body = .{ .json = "null" } };
    try openObject(s);
    while (try nextKey(s)) |key| {
        if (std.mem.eql(u8, key, "typeUrl")) {
            r.type_url = try readString(s);
        } else if (std.mem.eql(u8, key, "name")) {
            r.name = try readString(s);
        } else if (std.mem.eql(u8, key, "document")) {
            const doc = try readString(s);
            r.document = if (doc.len == 0) null else doc;
        } else if (std.mem.eql(u8, key, "body")) {
            r.body = try readBody(s);
        } else {
            try s.skipValue();
        }
    }
    return r;
}

fn readBody(s: *Scanner) !Body {
    var body: Body = .{ .json = "null" };
    try openObject(s);
    while (try nextKey(s)) |key| {
        if (std.mem.eql(u8, key, "json")) {
            const text, const v = try readRaw(s);
            body = .{ .json = if (v == .string) v.string else text };
        } else if (std.mem.eql(u8, key, "proto")) {
            const b64 = try readString(s);
            const decoder = std.base64.standard.Decoder;
            const bytes = try allocator.alloc(u8, try decoder.calcSizeForSlice(b64));
            try decoder.decode(bytes, b64);
            body = .{ .proto = bytes };
        } else {
            try s.skipValue();
        }
    }
    return body;
}

fn writeString(w: *std.Io.Writer, s: []const u8) !void {
    try std.json.Stringify.encodeJsonString(s, .{}, w);
}

fn writeOptional(w: *std.Io.Writer, name: []const u8, s: ?[]const u8) !void {
    const v = s orelse return;
    try w.print(",\"{s}\":", .{name});
    try writeString(w, v);
}

fn writeFailure(w: *std.Io.Writer, f: Failure) !void {
    try w.writeAll("{\"error\":{\"message\":");
    try writeString(w, f.message);
    try writeOptional(w, "document", f.document);
    try writeOptional(w, "field", f.field);
    try w.writeAll("}}");
}

fn writeResponse(w: *std.Io.Writer, out: *const Response) !void {
    try w.writeAll("{\"ok\":{\"resources\":[");
    for (out.resources.items, 0..) |r, i| {
        if (i > 0) try w.writeByte(',');
        try w.writeAll("{\"typeUrl\":");
        try writeString(w, r.type_url);
        try w.writeAll(",\"name\":");
        try writeString(w, r.name);
        try writeOptional(w, "document", r.document);
        switch (r.body) {
            .json => |text| {
                try w.writeAll(",\"body\":{\"json\":");
                try w.writeAll(text);
            },
            .proto => |bytes| {
                try w.writeAll(",\"body\":{\"proto\":\"");
                try std.base64.standard.Encoder.encodeWriter(w, bytes);
                try w.writeByte('"');
            },
        }
        try w.writeAll("}}");
    }
    try w.writeAll("],\"diagnostics\":[");
    for (out.diagnostics.items, 0..) |d, i| {
        if (i > 0) try w.writeByte(',');
        try w.print("{{\"severity\":\"{s}\",\"message\":", .{@tagName(d.severity)});
        try writeString(w, d.message);
        try writeOptional(w, "document", d.document);
        try writeOptional(w, "field", d.field);
        try w.writeByte('}');
    }
    try w.writeAll("]}}");
}
