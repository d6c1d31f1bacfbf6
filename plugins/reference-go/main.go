// reference-go: the reference translator (plugins/reference) in Go, built for GOOS=wasip1
// with the Go SDK (guest-sdk/go). It translates `Service` and `HttpGateway` exactly as the Rust
// plugin does: the same schema, the same checks in the same order, the same resources.
package main

import (
	"bytes"
	"fmt"
	"strings"

	xdst "xdst.dev/guest"
)

const pluginName = "reference-go"

// The kinds, in the Rust original's order.
var kindOrder = []string{"Service", "HttpGateway"}

var kinds = map[string]func(*document, *xdst.Response){
	"Service":     translateService,
	"HttpGateway": translateGateway,
}

func kindNames() []string { return kindOrder }

type plugin struct{}

func (plugin) Describe() xdst.PluginInfo {
	return xdst.PluginInfo{Name: pluginName, Version: "0.1.0", Kinds: kindNames(), Phase: xdst.Translate, Granularity: xdst.PerDocument}
}

func (plugin) Translate(req xdst.Request) (out xdst.Response, err *xdst.Error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			out, err = xdst.Response{}, f.err
		}
	}()
	checkConfig(req.Config)
	out = xdst.Response{Resources: []xdst.Resource{}, Diagnostics: []xdst.Diagnostic{}}
	for _, d := range req.Documents {
		doc := &document{kind: d.Kind, name: d.Name, origin: d.Origin, json: d.JSON}
		translate, ok := kinds[d.Kind]
		if !ok {
			panic(doc.errorHere(fmt.Sprintf("the %s plugin does not translate kind %s (it translates %s)",
				pluginName, debug(d.Kind), strings.Join(kindNames(), ", "))))
		}
		translate(doc, &out)
	}
	return out, nil
}

// checkConfig: the plugin takes no configuration: `null` or `{}`.
func checkConfig(config []byte) {
	text := bytes.TrimSpace(config)
	if len(text) == 0 || string(text) == "null" {
		return
	}
	n, err := parseJSON(text)
	if err == nil {
		_, err = configSpec(n, nil)
	}
	if err != nil {
		panic(failure{&xdst.Error{Message: fmt.Sprintf("plugin configuration: %s (the %s plugin takes none)", err.Error(), pluginName)}})
	}
}

func init() { xdst.Register(plugin{}) }

func main() {}
