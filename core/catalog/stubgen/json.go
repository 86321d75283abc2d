package stubgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// maxJSONDepth bounds the nesting of a schema document; real schemas stay far below it and the
// bound keeps the recursive decoder safe on hostile input.
const maxJSONDepth = 256

type jsonKind uint8

const (
	jNull jsonKind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// jv is a decoded JSON value that, unlike map[string]any, keeps the order of object keys: the
// order of "properties" becomes the order of the Python parameters.
type jv struct {
	kind jsonKind
	b    bool
	s    string // string value, or the number exactly as written
	arr  []*jv
	keys []string
	vals []*jv
}

// parseJSON decodes data into an ordered tree. Duplicate object keys keep their first position
// and their last value, as encoding/json does with maps.
func parseJSON(data []byte) (*jv, error) {
	if !json.Valid(data) {
		// The decoder below assumes valid input; Unmarshal words the error best.
		return nil, json.Unmarshal(data, new(json.RawMessage))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (*jv, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d levels", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jv{kind: jNull}, nil
	case bool:
		return &jv{kind: jBool, b: t}, nil
	case json.Number:
		return &jv{kind: jNumber, s: string(t)}, nil
	case string:
		return &jv{kind: jString, s: t}, nil
	case json.Delim:
		if t == '[' {
			v := &jv{kind: jArray}
			for dec.More() {
				e, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, e)
			}
			_, err := dec.Token()
			return v, err
		}
		v := &jv{kind: jObject}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			e, err := parseValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if i := v.index(key); i >= 0 {
				v.vals[i] = e
				continue
			}
			v.keys = append(v.keys, key)
			v.vals = append(v.vals, e)
		}
		_, err := dec.Token()
		return v, err
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func (v *jv) index(key string) int {
	for i, k := range v.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// get returns the member key of an object, or nil.
func (v *jv) get(key string) *jv {
	if v == nil || v.kind != jObject {
		return nil
	}
	if i := v.index(key); i >= 0 {
		return v.vals[i]
	}
	return nil
}

func (v *jv) has(key string) bool { return v.get(key) != nil }

// str returns the member key if it is a string.
func (v *jv) str(key string) (string, bool) {
	m := v.get(key)
	if m == nil || m.kind != jString {
		return "", false
	}
	return m.s, true
}

// list returns the member key if it is an array.
func (v *jv) list(key string) []*jv {
	m := v.get(key)
	if m == nil || m.kind != jArray {
		return nil
	}
	return m.arr
}

func (v *jv) isTrue(key string) bool {
	m := v.get(key)
	return m != nil && m.kind == jBool && m.b
}

// isInt reports whether a number is written as an integer (JSON has no separate integer type;
// 5 and 5.0 differ in intent, and only the first may be an int Literal or default).
func (v *jv) isInt() bool {
	return v.kind == jNumber && !strings.ContainsAny(v.s, ".eE")
}

// compact renders v as compact JSON for docstrings.
func (v *jv) compact() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *jv) write(b *strings.Builder) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jNumber:
		b.WriteString(v.s)
	case jString:
		enc, _ := json.Marshal(v.s)
		b.Write(enc)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteString(", ")
			}
			e.write(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			enc, _ := json.Marshal(k)
			b.Write(enc)
			b.WriteString(": ")
			v.vals[i].write(b)
		}
		b.WriteByte('}')
	}
}

// pointer resolves a JSON pointer written as a URI fragment ("/$defs/Node", percent-encoded
// or not) against root; nil when it leads nowhere.
func pointer(root *jv, frag string) (*jv, []string) {
	if dec, err := url.PathUnescape(frag); err == nil {
		frag = dec
	}
	if frag == "" {
		return root, nil
	}
	if frag[0] != '/' {
		return nil, nil
	}
	tokens := strings.Split(frag[1:], "/")
	cur := root
	for i, t := range tokens {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		tokens[i] = t
		switch cur.kind {
		case jObject:
			cur = cur.get(t)
		case jArray:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(cur.arr) || strconv.Itoa(n) != t {
				return nil, nil
			}
			cur = cur.arr[n]
		default:
			cur = nil
		}
		if cur == nil {
			return nil, nil
		}
	}
	return cur, tokens
}
