package main

// Reading JSON while keeping what the Rust reference relies on: whether a number was written
// as an integer or a float, integers beyond 2^53 exactly, and object keys in the order
// written, repeated ones included. Integers follow serde_json: beyond u64 (or i64 when
// negative), and `-0`, they are floats.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

type kind int

const (
	kNull kind = iota
	kBool
	kStr
	kInt
	kFloat
	kSeq
	kMap
)

type entry struct {
	key   string
	value *node
}

type node struct {
	t   kind
	b   bool
	s   string
	i   *big.Int
	f   float64
	seq []*node
	m   []entry
}

var (
	u64Max = new(big.Int).SetUint64(^uint64(0))
	i64Min = big.NewInt(-1 << 63)
)

func parseJSON(text []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	n, err := readValue(dec)
	if err != nil {
		return nil, fmt.Errorf("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("malformed JSON: trailing characters")
	}
	return n, nil
}

func readValue(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	return fromToken(dec, tok)
}

func fromToken(dec *json.Decoder, tok json.Token) (*node, error) {
	switch v := tok.(type) {
	case nil:
		return &node{t: kNull}, nil
	case bool:
		return &node{t: kBool, b: v}, nil
	case string:
		return &node{t: kStr, s: v}, nil
	case json.Number:
		return number(string(v)), nil
	case json.Delim:
		switch v {
		case '[':
			n := &node{t: kSeq}
			for dec.More() {
				item, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				n.seq = append(n.seq, item)
			}
			_, err := dec.Token()
			return n, err
		case '{':
			n := &node{t: kMap}
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					return nil, err
				}
				value, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				n.m = append(n.m, entry{key.(string), value})
			}
			_, err := dec.Token()
			return n, err
		}
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

func number(text string) *node {
	if !strings.ContainsAny(text, ".eE") {
		if i, ok := new(big.Int).SetString(text, 10); ok {
			negativeZero := strings.HasPrefix(text, "-") && i.Sign() == 0
			if i.Cmp(u64Max) <= 0 && i.Cmp(i64Min) >= 0 && !negativeZero {
				return &node{t: kInt, i: i}
			}
		}
	}
	f, _ := strconv.ParseFloat(text, 64)
	return &node{t: kFloat, f: f}
}

// field is the node of the last `key` entry of a map node, or nil.
func field(n *node, key string) *node {
	var found *node
	for _, e := range n.m {
		if e.key == key {
			found = e.value
		}
	}
	return found
}
