package main

// Intent documents as the plugin reads them, and the errors and warnings that name them
// (`Kind/name`) and the field at fault.

import xdst "xdst.dev/guest"

// failure carries a plugin error out of the translation.
type failure struct{ err *xdst.Error }

type document struct {
	kind, name, origin string
	json               []byte
}

func (d *document) id() string { return d.kind + "/" + d.name }

// spec reads `spec` with a decoder (an absent or null spec reads as `{}`).
func (d *document) spec(decode decoder) obj {
	root, err := parseJSON(d.json)
	if err != nil {
		panic(d.errorHere(err.Error()))
	}
	if root.t != kMap {
		panic(d.errorHere("the document is not a JSON object"))
	}
	count := 0
	for _, e := range root.m {
		if e.key == "spec" {
			count++
		}
	}
	if count > 1 {
		panic(d.errorHere("duplicate field `spec`"))
	}
	spec := field(root, "spec")
	if spec == nil || spec.t == kNull {
		spec = &node{t: kMap}
	}
	v, err := decode(spec, at(nil, "spec"))
	if err != nil {
		se := err.(*schemaError)
		panic(d.error(formatPath(se.path), se.msg))
	}
	return v.(obj)
}

func (d *document) error(field, message string) failure {
	return failure{xdst.Errorf(d.id(), field, "%s", message)}
}

func (d *document) errorHere(message string) failure {
	return failure{xdst.Errorf(d.id(), "", "%s", message)}
}

// expect fails with an error about `field` if a check found a problem.
func (d *document) expect(field, problem string) {
	if problem != "" {
		panic(d.error(field, problem))
	}
}

// warning about `field`, ending with the document's origin.
func (d *document) warning(field, message string) xdst.Diagnostic {
	if d.origin != "" {
		message += " (" + d.origin + ")"
	}
	id := d.id()
	return xdst.Diagnostic{Severity: "warning", Message: message, Document: &id, Field: &field}
}
