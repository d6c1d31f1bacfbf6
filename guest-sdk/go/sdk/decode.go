package xdst

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// Decode reads the whole document into v (a pointer), refusing fields v does not have. On
// failure it returns an *Error naming the document and, where it can be told, the field: the
// path from the document's root, such as `spec.port` for a value of the wrong type or
// `spec.adress` for an unknown field (encoding/json leaves list indices out of its paths, so
// `spec.endpoints.port` stands for every endpoint). Return it from Translate as it is.
//
// The result is an *Error, not an error: compare it with nil as such (assigning a nil *Error
// to a variable of type error makes a non-nil error).
func (d Document) Decode(v any) *Error {
	dec := json.NewDecoder(bytes.NewReader(d.JSON))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return Errorf(d.ID(), typeErr.Field, "invalid type: %s, expected %s", typeErr.Value, describeType(typeErr.Type))
	}
	message := strings.TrimPrefix(err.Error(), "json: ")
	if key, ok := strings.CutPrefix(message, "unknown field "); ok {
		if name, qerr := unquote(key); qerr == nil {
			return Errorf(d.ID(), unknownFieldPath(d.JSON, reflect.TypeOf(v), name), "unknown field `%s`", name)
		}
	}
	return Errorf(d.ID(), "", "%s", message)
}

func unquote(s string) (string, error) {
	var out string
	err := json.Unmarshal([]byte(s), &out)
	return out, err
}

// describeType names a Go type the way a plugin author reads it.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// unknownFieldPath finds where the unknown field name sits: the first object member called
// name, in document order, whose place in v's type is a struct without such a field. ""
// when there is none (the document is not JSON a struct describes).
func unknownFieldPath(doc []byte, t reflect.Type, name string) string {
	// Walk the document in its own order: object members come from the text, not a map.
	var walk func(dec *json.Decoder, t reflect.Type, path string) (string, bool)
	walk = func(dec *json.Decoder, t reflect.Type, path string) (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		delim, isDelim := tok.(json.Delim)
		if !isDelim {
			return "", false
		}
		t = deref(t)
		switch delim {
		case '[':
			var elem reflect.Type
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				elem = t.Elem()
			}
			for dec.More() {
				if p, found := walk(dec, elem, path); found {
					return p, true
				}
			}
		case '{':
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return "", false
				}
				key, _ := tok.(string)
				member := join(path, key)
				var next reflect.Type
				switch {
				case t != nil && t.Kind() == reflect.Struct:
					f, ok := structField(t, key)
					if !ok && key == name {
						return member, true
					}
					next = f
				case t != nil && t.Kind() == reflect.Map:
					next = t.Elem()
				}
				if p, found := walk(dec, next, member); found {
					return p, true
				}
			}
		}
		_, _ = dec.Token() // the closing delimiter
		return "", false
	}
	p, _ := walk(json.NewDecoder(bytes.NewReader(doc)), t, "")
	return p
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// structField is the type of t's field that encoding/json decodes key into: by its json tag,
// else its name, matched without regard to case as encoding/json does.
func structField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if strings.EqualFold(tag, key) {
			return f.Type, true
		}
	}
	return nil, false
}
