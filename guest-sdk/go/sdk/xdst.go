// Package xdst is the Go SDK for xdst plugins. A plugin is a WebAssembly module built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared that speaks xdst's core-module ABI
// (proto/core-abi/README.md in the xdst repository): JSON through linear memory. This package
// exports the ABI's functions (//go:wasmexport) and calls the plugin registered with Register;
// it uses the standard library only.
//
//	func init() { xdst.Register(myPlugin{}) }
//
// Go's wasip1 runtime imports wasi_snapshot_preview1: xdst gives it the empty WASI (no files,
// environment, arguments or network; a stopped clock and fixed random bytes unless the
// operator grants the plugin's capabilities; stdout and stderr to xdst's log).
package xdst

import (
	"encoding/json"
	"fmt"
	"unsafe"
)

// Phase says when a plugin runs: translate plugins turn intent into resources; patch plugins
// then change what translate plugins produced.
type Phase string

const (
	Translate Phase = "translate"
	Patch     Phase = "patch"
)

// Granularity says what a call is given: per-document plugins get the documents that changed;
// whole-set plugins get every document of their kinds.
type Granularity string

const (
	PerDocument Granularity = "per-document"
	WholeSet    Granularity = "whole-set"
)

// PluginInfo is what Describe returns.
type PluginInfo struct {
	Name        string      `json:"name"`
	Version     string      `json:"version"`
	Kinds       []string    `json:"kinds"`
	Phase       Phase       `json:"phase"`
	Granularity Granularity `json:"granularity"`
}

// Document is one intent document: kind, name (`namespace/name` for a namespaced one), where
// it came from, and the document itself as JSON.
type Document struct {
	Kind   string          `json:"kind"`
	Name   string          `json:"name"`
	Origin string          `json:"origin"`
	JSON   json.RawMessage `json:"json"`
}

// ID is the document's id, `Kind/name`: what errors, diagnostics and resources name.
func (d Document) ID() string { return d.Kind + "/" + d.Name }

// Body is a resource's message: Envoy's canonical proto3 JSON, or protobuf bytes.
type Body struct {
	JSON  json.RawMessage `json:"json,omitempty"`
	Proto []byte          `json:"proto,omitempty"`
}

// Resource is one Envoy resource a plugin returns.
type Resource struct {
	TypeURL  string  `json:"typeUrl"`
	Name     string  `json:"name"`
	Document *string `json:"document,omitempty"`
	Body     Body    `json:"body"`
}

// NewResource is a resource of type typeURL named name, made from document (its id, or ""),
// with message as its proto3 JSON (a map, or a struct with json tags).
func NewResource(typeURL, name, document string, message any) (Resource, error) {
	b, err := json.Marshal(message)
	if err != nil {
		return Resource{}, err
	}
	r := Resource{TypeURL: typeURL, Name: name, Body: Body{JSON: b}}
	if document != "" {
		r.Document = &document
	}
	return r, nil
}

// Diagnostic is something the operator should see that does not stop the translation.
type Diagnostic struct {
	Severity string  `json:"severity"` // "info" or "warning"
	Message  string  `json:"message"`
	Document *string `json:"document,omitempty"`
	Field    *string `json:"field,omitempty"`
}

// Request is what Translate is given.
type Request struct {
	NodeGroup string     `json:"nodeGroup"`
	Documents []Document `json:"documents"`
	// For patch plugins: the resources translated so far.
	Resources []Resource `json:"resources"`
	// The operator's configuration for the plugin; `null` when there is none.
	Config json.RawMessage `json:"config"`
}

// Response is what Translate returns.
type Response struct {
	Resources   []Resource   `json:"resources"`
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// Error is a plugin error: it fails the generation, names the document and field, and the
// last good configuration keeps serving.
type Error struct {
	Message  string  `json:"message"`
	Document *string `json:"document,omitempty"`
	Field    *string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Errorf is an error about document (its id, or "") at field (a path such as `spec.port`, or "").
func Errorf(document, field, format string, args ...any) *Error {
	e := &Error{Message: fmt.Sprintf(format, args...)}
	if document != "" {
		e.Document = &document
	}
	if field != "" {
		e.Field = &field
	}
	return e
}

// Plugin is what a plugin implements.
type Plugin interface {
	Describe() PluginInfo
	Translate(Request) (Response, *Error)
}

var plugin Plugin

// Register makes p the plugin; call it from an init function.
func Register(p Plugin) { plugin = p }

// Log levels for Log.
const (
	LevelDebug int32 = iota
	LevelInfo
	LevelWarn
	LevelError
)

// Log writes text to xdst's log, tagged with the plugin's name.
func Log(level int32, text string) {
	if len(text) == 0 {
		return
	}
	b := []byte(text)
	hostLog(level, unsafe.Pointer(&b[0]), int32(len(b)))
}

//go:wasmimport xdst log
func hostLog(level int32, ptr unsafe.Pointer, n int32)

// --- the ABI ---------------------------------------------------------------------------------

// Memory handed to the host, and the last answer: kept reachable so the collector leaves them
// in place while the host reads them. Every call gets a fresh instance, so nothing is freed.
var pinned [][]byte

//go:wasmexport xdst_plugin_abi_0_1_0
func abiMarker() {}

//go:wasmexport xdst_alloc
func abiAlloc(n int32) int32 {
	if n <= 0 {
		n = 1
	}
	b := make([]byte, n)
	pinned = append(pinned, b)
	return int32(uintptr(unsafe.Pointer(&b[0])))
}

//go:wasmexport xdst_describe
func abiDescribe() int64 {
	if plugin == nil {
		return answer([]byte(`{"name":"unregistered","version":"0","kinds":[],"phase":"translate","granularity":"whole-set"}`))
	}
	b, err := json.Marshal(plugin.Describe())
	if err != nil {
		panic(err)
	}
	return answer(b)
}

//go:wasmexport xdst_translate
func abiTranslate(ptr, n int32) int64 {
	in := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), int(n))
	var req Request
	if err := json.Unmarshal(in, &req); err != nil {
		return fail(&Error{Message: "the request is not the ABI's JSON: " + err.Error()})
	}
	if plugin == nil {
		return fail(&Error{Message: "no plugin registered (call xdst.Register from an init function)"})
	}
	resp, perr := plugin.Translate(req)
	if perr != nil {
		return fail(perr)
	}
	if resp.Resources == nil {
		resp.Resources = []Resource{}
	}
	b, err := json.Marshal(struct {
		Ok Response `json:"ok"`
	}{resp})
	if err != nil {
		return fail(&Error{Message: "encoding the response: " + err.Error()})
	}
	return answer(b)
}

func fail(e *Error) int64 {
	b, err := json.Marshal(struct {
		Error *Error `json:"error"`
	}{e})
	if err != nil {
		panic(err)
	}
	return answer(b)
}

func answer(b []byte) int64 {
	if len(b) == 0 {
		b = []byte("{}")
	}
	pinned = append(pinned, b)
	return int64(uintptr(unsafe.Pointer(&b[0])))<<32 | int64(len(b))
}
