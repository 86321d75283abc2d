package mcpface

import (
	"encoding/json"
	"sort"
	"strings"
)

// maxShape bounds a rendered return shape; deeper or wider schemas end in
// "…" and the stub (list_tools(server, tool)) has the whole TypedDict.
const maxShape = 400

// noSchemaReturn is what a stub returns for a tool without an output
// schema (core/bridge: structuredContent, else the text JSON-decoded,
// else the text).
const noSchemaReturn = "the result's text, JSON-decoded when it is JSON"

// returnShape renders a tool's output schema as a compact Python-like
// type, e.g. {content: str, total?: int}, so that search_tools at full
// detail says what a call returns without the stub's TypedDicts. A key
// with "?" may be missing.
func returnShape(schema json.RawMessage) string {
	if len(schema) == 0 || string(schema) == "null" {
		return noSchemaReturn
	}
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return "Any"
	}
	var b strings.Builder
	writeShape(&b, s, 0)
	if b.Len() > maxShape {
		return cutRunes(b.String(), maxShape)
	}
	return b.String()
}

func writeShape(b *strings.Builder, s map[string]any, depth int) {
	if b.Len() > maxShape {
		return
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			for i, a := range alts {
				if i > 0 {
					b.WriteString(" | ")
				}
				writeAny(b, a, depth)
			}
			return
		}
	}
	switch t := s["type"].(type) {
	case []any:
		for i, x := range t {
			if i > 0 {
				b.WriteString(" | ")
			}
			writeType(b, s, x, depth)
		}
	default:
		writeType(b, s, t, depth)
	}
}

func writeAny(b *strings.Builder, v any, depth int) {
	if m, ok := v.(map[string]any); ok {
		writeShape(b, m, depth)
		return
	}
	b.WriteString("Any")
}

func writeType(b *strings.Builder, s map[string]any, t any, depth int) {
	switch t {
	case "string":
		b.WriteString("str")
	case "integer":
		b.WriteString("int")
	case "number":
		b.WriteString("float")
	case "boolean":
		b.WriteString("bool")
	case "null":
		b.WriteString("None")
	case "array":
		b.WriteString("list[")
		writeAny(b, s["items"], depth+1)
		b.WriteString("]")
	case "object", nil:
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 || depth >= 3 {
			if t == nil && len(props) == 0 {
				b.WriteString("Any")
			} else {
				b.WriteString("dict")
			}
			return
		}
		required := map[string]bool{}
		if r, ok := s["required"].([]any); ok {
			for _, x := range r {
				if k, ok := x.(string); ok {
					required[k] = true
				}
			}
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		// Required keys first, each group in name order: JSON objects
		// decode without an order to keep.
		sort.Slice(keys, func(i, j int) bool {
			if required[keys[i]] != required[keys[j]] {
				return required[keys[i]]
			}
			return keys[i] < keys[j]
		})
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k)
			if !required[k] {
				b.WriteString("?")
			}
			b.WriteString(": ")
			writeAny(b, props[k], depth+1)
		}
		b.WriteString("}")
	default:
		b.WriteString("Any")
	}
}
