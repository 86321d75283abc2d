package stubgen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// testDefs are the definitions the type-mapping cases may refer to.
const testDefs = `{
	"Color": {"enum": ["red", "green"], "description": "A color."},
	"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}},
	"Self": {"$ref": "#/$defs/Self"},
	"Str": {"type": "string"},
	"a/b": {"type": "integer"}
}`

// stubOf generates the stub of a one-tool server "s" whose tool "t" has the input schema.
func stubOf(t *testing.T, input string) (Stub, string) {
	t.Helper()
	if !json.Valid([]byte(input)) {
		t.Fatalf("invalid test schema %s", input)
	}
	p := Generate([]Server{{Name: "s", Tools: []Tool{{Name: "t", InputSchema: json.RawMessage(input)}}}})[0]
	return p.Stubs[0], string(p.Files[p.Stubs[0].Path])
}

// paramOf returns what the signature says about the only parameter x: "x: <type>[ = <default>]".
func paramOf(t *testing.T, st Stub) string {
	t.Helper()
	got, ok := strings.CutPrefix(st.Signature, "t(*, ")
	if !ok {
		t.Fatalf("signature %q", st.Signature)
	}
	got, ok = strings.CutSuffix(got, ") -> Any")
	if !ok {
		t.Fatalf("signature %q", st.Signature)
	}
	return got
}

func TestTypeMapping(t *testing.T) {
	tests := []struct {
		schema string
		want   string
		warn   string // substring of a warning, if one is expected
	}{
		{`{"type": "string"}`, `str`, ""},
		{`{"type": "integer"}`, `int`, ""},
		{`{"type": "number"}`, `float`, ""},
		{`{"type": "boolean"}`, `bool`, ""},
		{`{"type": "null"}`, `None`, ""},
		{`{"type": ["string", "null"]}`, `str | None`, ""},
		{`{"type": ["integer", "number"]}`, `float`, ""},
		{`{"type": "string", "nullable": true}`, `str | None`, ""},
		{`{"type": "string", "format": "date-time", "minLength": 1}`, `str`, ""},
		{`{"type": "madeup"}`, `Any`, ""},
		{`{}`, `Any`, ""},
		{`true`, `Any`, ""},
		{`{"enum": ["a", "b"]}`, `Literal["a", "b"]`, ""},
		{`{"type": "string", "enum": ["x\"y", "\\", "新"]}`, `Literal["x\"y", "\\", "新"]`, ""},
		{`{"enum": ["a", 1, true, null, -2, "a"]}`, `Literal["a", 1, True, -2] | None`, ""},
		{`{"enum": [1.5, 2]}`, `float`, ""},
		{`{"enum": [[1], {"a": 1}]}`, `list[Any] | dict[str, Any]`, ""},
		{`{"enum": []}`, `Any`, ""},
		{`{"const": "x"}`, `Literal["x"]`, ""},
		{`{"const": 0, "type": "number"}`, `Literal[0]`, ""},
		{`{"type": "array", "items": {"type": "string"}}`, `list[str]`, ""},
		{`{"type": "array"}`, `list[Any]`, ""},
		{`{"items": {"type": "integer"}}`, `list[int]`, ""},
		{`{"type": "array", "items": {"type": "array", "items": {"enum": ["a"]}}}`, `list[list[Literal["a"]]]`, ""},
		{`{"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}`, `list[str | int]`, ""},
		{`{"type": "array", "items": [{"type": "string"}]}`, `list[Any]`, ""},
		{`{"type": "object"}`, `dict[str, Any]`, ""},
		{`{"type": "object", "properties": {}}`, `dict[str, Any]`, ""},
		{`{"type": "object", "additionalProperties": {"type": "integer"}}`, `dict[str, int]`, ""},
		{`{"type": "object", "patternProperties": {"^a": {"type": "string"}, "^b": {"type": "integer"}}}`, `dict[str, str | int]`, ""},
		{`{"type": "object", "properties": {"a": {"type": "string"}}}`, `TX`, ""},
		{`{"properties": {"a": {"type": "string"}}, "additionalProperties": true}`, `TX`, ""},
		{`{"anyOf": [{"type": "string"}, {"type": "integer"}]}`, `str | int`, ""},
		{`{"oneOf": [{"type": "string"}, {"type": "null"}]}`, `str | None`, ""},
		{`{"anyOf": [{"type": "string"}, {}]}`, `Any`, ""},
		{`{"type": "string", "anyOf": [{"format": "date"}, {"format": "time"}]}`, `str`, ""},
		{`{"type": "string", "anyOf": [{"const": "a"}, {"const": "b"}]}`, `Literal["a", "b"]`, ""},
		{`{"anyOf": [{"const": "a"}, {"type": "string"}]}`, `str`, ""},
		{`{"anyOf": [{"type": "integer"}, {"type": "number"}]}`, `float`, ""},
		{`{"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}`, `TXVariant1 | TXVariant2`, ""},
		{`{"anyOf": [{"type": "object", "properties": {"a": {}}}, {"type": "null"}]}`, `TX | None`, ""},
		{`{"allOf": [{"type": "integer"}]}`, `int`, ""},
		{`{"allOf": [{"type": "string"}, {"minLength": 1}]}`, `str`, ""},
		{`{"allOf": [{"$ref": "#/$defs/Color"}], "description": "pydantic v1"}`, `Color`, ""},
		{`{"allOf": [{"properties": {"a": {}}}, {"$ref": "#/$defs/Node"}]}`, `TX`, ""},
		{`{"allOf": [{"type": "string"}, {"type": "object", "properties": {"a": {}}}]}`, `str`, ""},
		{`{"$ref": "#/$defs/Color"}`, `Color`, ""},
		{`{"$ref": "#/$defs/Color", "nullable": true}`, `Color | None`, ""},
		{`{"$ref": "#/$defs/Node"}`, `Node`, ""},
		{`{"$ref": "#/$defs/Str"}`, `Str`, ""},
		{`{"$ref": "#/$defs/a~1b"}`, `AB`, ""},
		{`{"$ref": "#/%24defs/Str"}`, `Str`, ""},
		{`{"$ref": "#/$defs/Node/properties/kids"}`, `list[Node]`, ""},
		{`{"$ref": "#/$defs/Self"}`, `Self`, "refers to itself"},
		{`{"$ref": "https://example.com/s.json"}`, `Any`, "not local"},
		{`{"$ref": "#/$defs/Nope"}`, `Any`, "does not resolve"},
		{`{"$ref": "#/$defs/Color/enum/7"}`, `Any`, "does not resolve"},
		{deepArray(40), strings.Repeat("list[", maxTypeDepth) + "Any" + strings.Repeat("]", maxTypeDepth), "too deep"},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			input := fmt.Sprintf(`{"type": "object", "properties": {"x": %s}, "required": ["x"], "$defs": %s}`, tt.schema, testDefs)
			st, src := stubOf(t, input)
			if got := paramOf(t, st); got != "x: "+tt.want {
				t.Errorf("got %q, want %q\n%s", got, "x: "+tt.want, src)
			}
			warned := strings.Join(st.Warnings, "; ")
			if tt.warn == "" && warned != "" || !strings.Contains(warned, tt.warn) {
				t.Errorf("warnings %q, want %q", warned, tt.warn)
			}
		})
	}
}

func deepArray(n int) string {
	return strings.Repeat(`{"type": "array", "items": `, n) + `{"type": "string"}` + strings.Repeat("}", n)
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		schema string
		want   string
		body   string // how the argument is sent
	}{
		{`{"type": "integer"}`, `x: int | None = None`, `if x is not None:`},
		{`{"type": "integer", "default": 5}`, `x: int = 5`, `if x != 5:`},
		{`{"type": "integer", "default": -0}`, `x: int = 0`, `if x != 0:`},
		{`{"type": "integer", "default": 1.5}`, `x: int | None = None`, `if x is not None:`},
		{`{"type": "number", "default": 1}`, `x: float = 1`, `if x != 1:`},
		{`{"type": "number", "default": 2.5e-3}`, `x: float = 2.5e-3`, `if x != 2.5e-3:`},
		{`{"type": "string", "default": "a\"b\\"}`, `x: str = "a\"b\\"`, `if x != "a\"b\\":`},
		{`{"type": "string", "default": 3}`, `x: str | None = None`, `if x is not None:`},
		{`{"type": "boolean", "default": true}`, `x: bool = True`, `if x != True:`},
		{`{"enum": ["a", "b"], "default": "b"}`, `x: Literal["a", "b"] = "b"`, `if x != "b":`},
		{`{"enum": ["a", "b"], "default": "c"}`, `x: Literal["a", "b"] | None = None`, `if x is not None:`},
		{`{"type": "array", "default": []}`, `x: list[Any] | None = None`, `if x is not None:`},
		{`{"type": ["string", "null"], "default": "v"}`, `x: str | None = "v"`, `if x != "v":`},
		{`{"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}`, `x: str | None = None`, `if x is not None:`},
		{`{"default": 7}`, `x: Any = 7`, `if x != 7:`},
		{`{"type": "integer", "default": ` + strings.Repeat("9", 5000) + `}`, `x: int | None = None`, `if x is not None:`},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			st, src := stubOf(t, `{"type": "object", "properties": {"x": `+tt.schema+`}}`)
			if got := paramOf(t, st); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if !strings.Contains(src, "    "+tt.body+"\n        _arguments[\"x\"] = x\n") {
				t.Errorf("body does not send x with %q:\n%s", tt.body, src)
			}
		})
	}
}

func TestParameterOrderAndNames(t *testing.T) {
	st, src := stubOf(t, `{"type": "object", "properties": {
		"b": {"type": "string"}, "from": {"type": "string"}, "a-b": {"type": "integer"},
		"c": {"type": "string"}, "a_b": {"type": "integer"}
	}, "required": ["c", "from"]}`)
	want := `t(*, from_: str, c: str, b: str | None = None, a_b_2: int | None = None, a_b: int | None = None) -> Any`
	if st.Signature != want {
		t.Errorf("signature\n got %s\nwant %s", st.Signature, want)
	}
	for _, line := range []string{
		`    _arguments: dict[str, Any] = {"from": from_, "c": c}`,
		`        _arguments["a-b"] = a_b_2`,
		`        _arguments["a_b"] = a_b`,
	} {
		if !strings.Contains(src, line+"\n") {
			t.Errorf("missing %q in\n%s", line, src)
		}
	}
}

func TestInputSchemaShapes(t *testing.T) {
	tests := []struct {
		name, schema, want, warn string
	}{
		{"absent", ``, `t() -> Any`, ""},
		{"no properties", `{"type": "object"}`, `t() -> Any`, ""},
		{"not JSON", `{"type": `, `t(**extra: Any) -> Any`, "input schema: unexpected end of JSON input"},
		{"not an object", `["x"]`, `t() -> Any`, "not an object schema"},
		{"nested too deep", strings.Repeat("[", 300) + strings.Repeat("]", 300), `t(**extra: Any) -> Any`, "nested deeper than 256"},
		{"root $ref", `{"$ref": "#/$defs/A", "$defs": {"A": {"properties": {"a": {"type": "string"}}, "required": ["a"]}}}`, `t(*, a: str) -> Any`, ""},
		{"allOf root", `{"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {"type": "integer"}}}]}`, `t(*, a: str, b: int | None = None) -> Any`, ""},
		{"anyOf root", `{"anyOf": [{"properties": {"a": {}, "b": {}}, "required": ["a", "b"]}, {"properties": {"a": {}}, "required": ["a"]}]}`, `t(*, a: Any, b: Any = None) -> Any`, ""},
		{"required but undeclared", `{"properties": {"a": {}}, "required": ["a", "z"]}`, `t(*, a: Any) -> Any`, ""},
		{"further arguments", `{"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "number"}}`, `t(*, a: str | None = None, **extra: float) -> Any`, ""},
		{"extra name taken", `{"properties": {"extra": {"type": "string"}}, "required": ["extra"], "additionalProperties": true}`, `t(*, extra: str, **extra_2: Any) -> Any`, ""},
		{"closed", `{"properties": {"a": {"type": "string"}}, "additionalProperties": false}`, `t(*, a: str | None = None) -> Any`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Generate([]Server{{Name: "s", Tools: []Tool{{Name: "t", InputSchema: json.RawMessage(tt.schema)}}}})[0]
			st := p.Stubs[0]
			if st.Signature != tt.want {
				t.Errorf("signature %q, want %q", st.Signature, tt.want)
			}
			warned := strings.Join(st.Warnings, "; ")
			if tt.warn == "" && warned != "" || !strings.Contains(warned, tt.warn) {
				t.Errorf("warnings %q, want %q", warned, tt.warn)
			}
		})
	}
}

func TestReturnType(t *testing.T) {
	tests := []struct {
		name, output, want string
	}{
		{"none", ``, `Any`},
		{"null", `null`, `Any`},
		{"object", `{"type": "object", "properties": {"ok": {"type": "boolean"}}}`, `TResult`},
		{"free-form object", `{"type": "object"}`, `dict[str, Any]`},
		{"array", `{"type": "array", "items": {"type": "object", "properties": {"id": {}}}}`, `list[TResultItem]`},
		{"invalid", `{`, `Any`},
		{"names do not clash with input types", `{"properties": {"x": {"properties": {"a": {}}}}}`, `TResult`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := `{"properties": {"x": {"properties": {"a": {}}}}}`
			p := Generate([]Server{{Name: "s", Tools: []Tool{{Name: "t", InputSchema: json.RawMessage(in), OutputSchema: json.RawMessage(tt.output)}}}})[0]
			st := p.Stubs[0]
			want := "t(*, x: TX | None = None) -> " + tt.want
			if st.Signature != want {
				t.Errorf("signature %q, want %q", st.Signature, want)
			}
		})
	}
}

func TestDocstrings(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name string
		tool Tool
		want string
	}{
		{"description", Tool{Name: "t", Description: "Does it.\r\n\r\nReally.  "},
			"    \"\"\"Does it.\n\n    Really.\n    \"\"\"\n"},
		{"title when no description", Tool{Name: "t", Title: "The T"},
			"    \"\"\"The T\"\"\"\n"},
		{"annotation title", Tool{Name: "t", Annotations: Annotations{Title: "Annotated"}},
			"    \"\"\"Annotated\"\"\"\n"},
		{"fallback", Tool{Name: "t"},
			"    \"\"\"Call the MCP tool \"t\" of server \"s\".\"\"\"\n"},
		{"quotes and backslashes", Tool{Name: "t", Description: `a """b""" \n "`},
			"    \"\"\"a \\\"\\\"\"b\\\"\\\"\" \\\\n \\\"\"\"\"\n"},
		{"control characters", Tool{Name: "t", Description: "nul\x00 bell\a sep\u2028x"},
			"    \"\"\"nul\\x00 bell\\x07 sep\\u2028x\"\"\"\n"},
		{"hints", Tool{Name: "t", Description: "D", Annotations: Annotations{ReadOnlyHint: &yes, DestructiveHint: &no, IdempotentHint: &yes}},
			"    \"\"\"D\n\n    Hints: read-only, idempotent.\n    \"\"\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Generate([]Server{{Name: "s", Tools: []Tool{tt.tool}}})[0]
			src := string(p.Files[p.Stubs[0].Path])
			if !strings.Contains(src, ":\n"+tt.want+"    return ") {
				t.Errorf("want docstring\n%s\nin\n%s", tt.want, src)
			}
		})
	}
}

func TestPyString(t *testing.T) {
	tests := []struct{ in, want string }{
		{`plain`, `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"nl\n\r\t", `"nl\n\r\t"`},
		{"\x00\x7f\u0085\u2029\U000E0001", `"\x00\x7f\x85\u2029\U000e0001"`},
		{"中文 é", `"中文 é"`},
	}
	for _, tt := range tests {
		if got := pyString(tt.in); got != tt.want {
			t.Errorf("pyString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
