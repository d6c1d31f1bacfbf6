package main

// Reading intent `spec`s the way the Rust reference does with serde: each decoder takes a JSON
// node and its path and returns a Go value, or a schemaError naming the path and saying what
// is wrong in serde's words. Structs refuse unknown fields and check keys in the order written,
// then missing fields in declaration order, as serde does.

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

type schemaError struct {
	path *path
	msg  string
}

func (e *schemaError) Error() string { return e.msg }

// A path is a chain of segments (field names and list indexes) from the innermost out.
type path struct {
	up      *path
	name    string
	index   int
	isIndex bool
}

func at(up *path, name string) *path { return &path{up: up, name: name} }
func atIndex(up *path, i int) *path  { return &path{up: up, index: i, isIndex: true} }
func fail(p *path, format string, args ...any) error {
	return &schemaError{p, fmt.Sprintf(format, args...)}
}

// formatPath: `spec.hosts[0].routes[1]`.
func formatPath(p *path) string {
	out := ""
	for ; p != nil; p = p.up {
		switch {
		case p.isIndex:
			out = "[" + strconv.Itoa(p.index) + "]" + out
		case p.up == nil:
			out = p.name + out
		default:
			out = "." + p.name + out
		}
	}
	return out
}

// unexpected names a value as serde_json does: integer `5`, string "x", map.
func unexpected(n *node) string {
	switch n.t {
	case kNull:
		return "null"
	case kBool:
		return fmt.Sprintf("boolean `%v`", n.b)
	case kStr:
		return "string " + debug(n.s)
	case kInt:
		return fmt.Sprintf("integer `%s`", n.i.String())
	case kFloat:
		return fmt.Sprintf("floating point `%s`", formatFloat(n.f))
	case kSeq:
		return "sequence"
	}
	return "map"
}

func formatFloat(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if strings.Contains(s, "e") {
		return strings.Replace(s, "e+", "e", 1)
	}
	if !strings.Contains(s, ".") {
		return s + ".0"
	}
	return s
}

func invalidType(n *node, p *path, expected string) error {
	return fail(p, "invalid type: %s, expected %s", unexpected(n), expected)
}

// oneOf: `a`; `a` or `b`; one of `a`, `b`, `c`.
func oneOf(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	switch len(q) {
	case 1:
		return q[0]
	case 2:
		return q[0] + " or " + q[1]
	}
	return "one of " + strings.Join(q, ", ")
}

type decoder func(n *node, p *path) (any, error)

func str(n *node, p *path) (any, error) {
	if n.t != kStr {
		return nil, invalidType(n, p, "a string")
	}
	return n.s, nil
}

func boolean(n *node, p *path) (any, error) {
	if n.t != kBool {
		return nil, invalidType(n, p, "a boolean")
	}
	return n.b, nil
}

func unsigned(max uint64, expected string) decoder {
	return func(n *node, p *path) (any, error) {
		if n.t != kInt {
			return nil, invalidType(n, p, expected)
		}
		if n.i.Sign() < 0 || n.i.Cmp(new(big.Int).SetUint64(max)) > 0 {
			return nil, fail(p, "invalid value: integer `%s`, expected %s", n.i.String(), expected)
		}
		return n.i.Uint64(), nil
	}
}

var (
	u16 = unsigned(0xffff, "u16")
	u32 = unsigned(0xffff_ffff, "u32")
)

// port is a TCP port, 1 to 65535.
func port(n *node, p *path) (any, error) {
	const expected = "a port number from 1 to 65535"
	if n.t != kInt {
		return nil, invalidType(n, p, expected)
	}
	if n.i.Cmp(big.NewInt(1)) < 0 || n.i.Cmp(big.NewInt(65535)) > 0 {
		return nil, fail(p, "invalid value: integer `%s`, expected %s", n.i.String(), expected)
	}
	return n.i.Uint64(), nil
}

// durationOf reads a duration string (`250ms`) as nanoseconds.
func durationOf(n *node, p *path) (any, error) {
	if n.t != kStr {
		return nil, invalidType(n, p, "a duration string such as 250ms, 1s or 1m30s")
	}
	d, err := parseDuration(n.s)
	if err != nil {
		return nil, fail(p, "%s", err.Error())
	}
	return d, nil
}

// oneOfStrings is a unit-only Rust enum: a string, or (as serde_json reads it too) {variant: null}.
func oneOfStrings(variants ...string) decoder {
	known := func(v string) bool {
		for _, x := range variants {
			if x == v {
				return true
			}
		}
		return false
	}
	unknown := func(v string, p *path) error {
		return fail(p, "unknown variant `%s`, expected %s", v, oneOf(variants))
	}
	return func(n *node, p *path) (any, error) {
		if n.t == kStr {
			if !known(n.s) {
				return nil, unknown(n.s, p)
			}
			return n.s, nil
		}
		if n.t != kMap || len(n.m) == 0 {
			return nil, fail(p, "expected value")
		}
		variant, value := n.m[0].key, n.m[0].value
		if !known(variant) {
			return nil, unknown(variant, p)
		}
		if value.t != kNull {
			return nil, invalidType(value, at(p, variant), "unit")
		}
		if len(n.m) > 1 {
			return nil, fail(p, "expected value")
		}
		return variant, nil
	}
}

func list(item decoder) decoder {
	return func(n *node, p *path) (any, error) {
		if n.t != kSeq {
			return nil, invalidType(n, p, "a sequence")
		}
		out := make([]any, 0, len(n.seq))
		for i, x := range n.seq {
			v, err := item(x, atIndex(p, i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
}

// kv is one entry of a map of strings.
type kv struct {
	key   string
	value any
}

// mapOf is a map with string keys: entries in code point order of the keys, the last of a
// repeated key winning.
func mapOf(value decoder) decoder {
	return func(n *node, p *path) (any, error) {
		if n.t != kMap {
			return nil, invalidType(n, p, "a map")
		}
		byKey := map[string]any{}
		for _, e := range n.m {
			v, err := value(e.value, at(p, e.key))
			if err != nil {
				return nil, err
			}
			byKey[e.key] = v
		}
		out := make([]kv, 0, len(byKey))
		for k, v := range byKey {
			out = append(out, kv{k, v})
		}
		// Go compares strings by bytes: for UTF-8 that is code point order.
		sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
		return out, nil
	}
}

type fieldKind int

const (
	required fieldKind = iota
	optional
	withDefault
)

type fieldSpec struct {
	name   string
	kind   fieldKind
	decode decoder
	make   func() any
}

func req(name string, d decoder) fieldSpec { return fieldSpec{name: name, kind: required, decode: d} }
func opt(name string, d decoder) fieldSpec { return fieldSpec{name: name, kind: optional, decode: d} }
func def(name string, d decoder, make func() any) fieldSpec {
	return fieldSpec{name: name, kind: withDefault, decode: d, make: make}
}

// obj is a decoded struct: field name to value (nil for an absent optional field).
type obj map[string]any

// structOf is a struct with `fields` (in the Rust declaration order) refusing unknown fields.
func structOf(rustName string, fields ...fieldSpec) decoder {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	find := func(key string) *fieldSpec {
		for i := range fields {
			if fields[i].name == key {
				return &fields[i]
			}
		}
		return nil
	}
	return func(n *node, p *path) (any, error) {
		if n.t == kSeq {
			return structFromSeq(rustName, fields, n, p)
		}
		if n.t != kMap {
			return nil, invalidType(n, p, "struct "+rustName)
		}
		out := obj{}
		seen := map[string]bool{}
		for _, e := range n.m {
			f := find(e.key)
			if f == nil {
				expected := "there are no fields"
				if len(names) > 0 {
					expected = "expected " + oneOf(names)
				}
				return nil, fail(at(p, e.key), "unknown field `%s`, %s", e.key, expected)
			}
			if seen[e.key] {
				return nil, fail(p, "duplicate field `%s`", e.key)
			}
			seen[e.key] = true
			if f.kind == optional && e.value.t == kNull {
				out[e.key] = nil
				continue
			}
			v, err := f.decode(e.value, at(p, e.key))
			if err != nil {
				return nil, err
			}
			out[e.key] = v
		}
		for _, f := range fields {
			if seen[f.name] {
				continue
			}
			switch f.kind {
			case required:
				return nil, fail(p, "missing field `%s`", f.name)
			case withDefault:
				out[f.name] = f.make()
			default:
				out[f.name] = nil
			}
		}
		return out, nil
	}
}

// serde also reads a struct from a list of its fields' values, in declaration order.
func structFromSeq(rustName string, fields []fieldSpec, n *node, p *path) (any, error) {
	out := obj{}
	for i, f := range fields {
		if i >= len(n.seq) {
			if f.kind != withDefault {
				return nil, fail(p, "invalid length %d, expected struct %s with %d elements", i, rustName, len(fields))
			}
			out[f.name] = f.make()
			continue
		}
		value := n.seq[i]
		if f.kind == optional && value.t == kNull {
			out[f.name] = nil
			continue
		}
		v, err := f.decode(value, atIndex(p, i))
		if err != nil {
			return nil, err
		}
		out[f.name] = v
	}
	if len(n.seq) > len(fields) {
		return nil, fail(p, "trailing characters")
	}
	return out, nil
}
