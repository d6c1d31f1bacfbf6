// {{name}}: an xdst translation plugin in Go.
//
// Translates `{{kind}}` documents
//
//	kind: {{kind}}
//	metadata: {name: web}
//	spec: {address: 10.0.0.1, port: 8080}
//
// into one STATIC Envoy Cluster named after the document. It is built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, and speaks xdst's core-module ABI
// through the SDK package (sdk/, import path xdst.dev/guest).
package main

import (
	"fmt"

	xdst "xdst.dev/guest"
)

const (
	kind    = "{{kind}}"
	cluster = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
)

type plugin struct{}

func (plugin) Describe() xdst.PluginInfo {
	return xdst.PluginInfo{
		Name:        "{{name}}",
		Version:     "0.1.0",
		Kinds:       []string{kind},
		Phase:       xdst.Translate,
		Granularity: xdst.PerDocument,
	}
}

// The document, as written.
type document struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec *struct {
		Address string `json:"address"`
		Port    *int   `json:"port"`
	} `json:"spec"`
}

func (plugin) Translate(req xdst.Request) (xdst.Response, *xdst.Error) {
	out := xdst.Response{}
	for _, d := range req.Documents {
		id := d.ID()
		var doc document
		if err := d.Decode(&doc); err != nil { // names the field: a wrong type, an unknown field
			return out, err
		}
		if doc.Spec == nil {
			return out, xdst.Errorf(id, "spec", "missing: {address, port}")
		}
		if doc.Spec.Address == "" {
			return out, xdst.Errorf(id, "spec.address", "missing: an IP address such as 10.0.0.1")
		}
		if doc.Spec.Port == nil || *doc.Spec.Port < 1 || *doc.Spec.Port > 65535 {
			return out, xdst.Errorf(id, "spec.port", "must be a port number from 1 to 65535")
		}
		endpoint := map[string]any{"address": map[string]any{"socket_address": map[string]any{
			"address": doc.Spec.Address, "port_value": *doc.Spec.Port,
		}}}
		r, err := xdst.NewResource(cluster, d.Name, id, map[string]any{
			"name": d.Name,
			"type": "STATIC",
			"load_assignment": map[string]any{
				"cluster_name": d.Name,
				"endpoints":    []any{map[string]any{"lb_endpoints": []any{map[string]any{"endpoint": endpoint}}}},
			},
		})
		if err != nil {
			return out, xdst.Errorf(id, "", "%v", err)
		}
		out.Resources = append(out.Resources, r)
	}
	xdst.Log(xdst.LevelDebug, fmt.Sprintf("translated %d documents", len(req.Documents)))
	return out, nil
}

func init() { xdst.Register(plugin{}) }

// A c-shared module's main is never called: xdst calls the exports above.
func main() {}
