package stubgen

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of a schema document; real schemas stay far below it and the
// bound keeps the recursive decoder safe on hostile input.
const maxJSONDepth = 256

var errTooDeep = fmt.Errorf("JSON nested deeper than %d levels", maxJSONDepth)

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
		// The parser below relies on valid input; Unmarshal words the error best.
		return nil, json.Unmarshal(data, new(json.RawMessage))
	}
	p := jsonParser{data: data}
	return p.value(0)
}

// jsonParser reads JSON already checked by json.Valid (so it needs no error handling of its
// own beyond nesting depth); it is several times faster than json.Decoder's Token API.
type jsonParser struct {
	data []byte
	i    int
}

func (p *jsonParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (*jv, error) {
	if depth > maxJSONDepth {
		return nil, errTooDeep
	}
	p.space()
	switch p.data[p.i] {
	case '{':
		p.i++
		v := &jv{kind: jObject}
		p.space()
		if p.data[p.i] == '}' {
			p.i++
			return v, nil
		}
		for {
			p.space()
			key := p.string()
			p.space()
			p.i++ // ':'
			e, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if i := v.index(key); i >= 0 {
				v.vals[i] = e
			} else {
				v.keys = append(v.keys, key)
				v.vals = append(v.vals, e)
			}
			p.space()
			p.i++ // ',' or '}'
			if p.data[p.i-1] == '}' {
				return v, nil
			}
		}
	case '[':
		p.i++
		v := &jv{kind: jArray}
		p.space()
		if p.data[p.i] == ']' {
			p.i++
			return v, nil
		}
		for {
			e, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v.arr = append(v.arr, e)
			p.space()
			p.i++ // ',' or ']'
			if p.data[p.i-1] == ']' {
				return v, nil
			}
		}
	case '"':
		return &jv{kind: jString, s: p.string()}, nil
	case 't':
		p.i += len("true")
		return &jv{kind: jBool, b: true}, nil
	case 'f':
		p.i += len("false")
		return &jv{kind: jBool}, nil
	case 'n':
		p.i += len("null")
		return &jv{kind: jNull}, nil
	}
	start := p.i
	for p.i < len(p.data) && strings.IndexByte("+-0123456789.eE", p.data[p.i]) >= 0 {
		p.i++
	}
	return &jv{kind: jNumber, s: string(p.data[start:p.i])}, nil
}

// string reads the string literal at p.i.
func (p *jsonParser) string() string {
	start := p.i
	p.i++
	escaped := false
	for p.data[p.i] != '"' {
		if p.data[p.i] == '\\' {
			escaped = true
			p.i++
		}
		p.i++
	}
	p.i++
	raw := p.data[start:p.i]
	if !escaped && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid by construction; decodes escapes, replaces bad UTF-8
	return s
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
