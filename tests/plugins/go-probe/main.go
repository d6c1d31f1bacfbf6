// go-probe: a Go plugin that tries what a plugin should not get without its capabilities: a
// file, the environment, the arguments, the clock and random bytes. It answers every request
// with one info diagnostic holding what it found, as JSON (tests/it/plugins.rs reads it).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	xdst "xdst.dev/guest"
)

type probe struct{}

func (probe) Describe() xdst.PluginInfo {
	return xdst.PluginInfo{Name: "go-probe", Version: "0.1.0", Kinds: []string{"Probe"}, Phase: xdst.Translate, Granularity: xdst.WholeSet}
}

func (probe) Translate(req xdst.Request) (xdst.Response, *xdst.Error) {
	found := map[string]any{}
	if b, err := os.ReadFile("/etc/hostname"); err != nil {
		found["file"] = "error: " + err.Error()
	} else {
		found["file"] = string(b)
	}
	if _, err := os.ReadDir("/"); err != nil {
		found["root"] = "error: " + err.Error()
	} else {
		found["root"] = "listed"
	}
	found["env"] = os.Environ()
	found["home"] = os.Getenv("HOME")
	found["args"] = os.Args[min(1, len(os.Args)):]
	found["unix_nanos"] = time.Now().UnixNano()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		found["random"] = "error: " + err.Error()
	} else {
		found["random"] = hex.EncodeToString(b)
	}
	fmt.Println("go-probe writes to stdout")
	text, _ := json.Marshal(found)
	return xdst.Response{Diagnostics: []xdst.Diagnostic{{Severity: "info", Message: string(text)}}}, nil
}

func init() { xdst.Register(probe{}) }

func main() {}
