package mcpface

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReturnShape(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"none", "", noSchemaReturn},
		{"null", "null", noSchemaReturn},
		{"object", `{"type":"object","properties":{"content":{"type":"string"}},"required":["content"]}`, "{content: str}"},
		{"optional keys last", `{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"number"},"c":{"type":"boolean"}},"required":["c"]}`,
			"{c: bool, a?: float, b?: int}"},
		{"list of objects", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}},"required":["items"]}`,
			"{items: list[{id: str}]}"},
		{"unions", `{"anyOf":[{"type":"string"},{"type":"null"}]}`, "str | None"},
		{"type list", `{"type":["integer","null"]}`, "int | None"},
		{"deep objects end in dict", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"object","properties":{"d":{"type":"string"}}}}}}}}}`,
			"{a?: {b?: {c?: dict}}}"},
		{"untyped", `{}`, "Any"},
		{"not JSON", `{`, "Any"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := returnShape(json.RawMessage(tt.schema)); got != tt.want {
				t.Errorf("returnShape = %q, want %q", got, tt.want)
			}
		})
	}
	wide := `{"type":"object","properties":{`
	var props []string
	for i := range 100 {
		props = append(props, `"key_`+strings.Repeat("x", i%7)+string(rune('a'+i%26))+`":{"type":"string"}`)
	}
	wide += strings.Join(props, ",") + `}}`
	if got := returnShape(json.RawMessage(wide)); len([]rune(got)) > maxShape {
		t.Errorf("a wide schema renders %d runes, over %d", len([]rune(got)), maxShape)
	}
}
