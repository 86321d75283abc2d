package schemamsg

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestDescribe: every message names the argument and says in words what
// is wrong, not in the validator's keyword shorthand.
func TestDescribe(t *testing.T) {
	const schema = `{"type": "object", "properties": {
		"count": {"type": "integer", "minimum": 1, "maximum": 10},
		"ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25},
		"name":  {"type": "string", "minLength": 2, "maxLength": 4},
		"tags":  {"type": "array", "minItems": 1, "maxItems": 2, "uniqueItems": true},
		"opts":  {"type": "object", "minProperties": 1, "maxProperties": 1},
		"v":     {"oneOf": [{"type": "string"}, {"type": "integer"}]},
		"w":     {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
		"e":     {"enum": ["a b", "it's", 1, null, {"k": 1}]},
		"c":     {"const": null}
	}, "required": ["count"]}`
	tests := []struct{ args, want string }{
		{`{}`, `missing required argument "count"`},
		{`{"count": 0}`, `argument "count": must be at least 1, got 0`},
		{`{"count": 11}`, `argument "count": must be at most 10, got 11`},
		{`{"count": 1, "ratio": 0}`, `argument "ratio": must be greater than 0, got 0`},
		{`{"count": 1, "ratio": 1}`, `argument "ratio": must be less than 1, got 1`},
		{`{"count": 1, "ratio": 0.3}`, `argument "ratio": must be a multiple of 0.25, got 0.3`},
		{`{"count": 1, "name": "a"}`, `argument "name": must be at least 2 characters long, got 1`},
		{`{"count": 1, "name": "abcde"}`, `argument "name": must be at most 4 characters long, got 5`},
		{`{"count": 1, "tags": []}`, `argument "tags": must have at least 1 item, got 0`},
		{`{"count": 1, "tags": [1, 2, 3]}`, `argument "tags": must have at most 2 items, got 3`},
		{`{"count": 1, "tags": [1, 1]}`, `argument "tags": items must be unique, but items 0 and 1 are equal`},
		{`{"count": 1, "opts": {}}`, `argument "opts": must have at least 1 property, got 0`},
		{`{"count": 1, "opts": {"a": 1, "b": 2}}`, `argument "opts": must have at most 1 property, got 2`},
		{`{"count": 1, "v": [1]}`, `argument "v": expected string or integer, got array`},
		{`{"count": 1, "w": 1}`, `argument "w": expected string or boolean, got number`},
		{`{"count": "x"}`, `argument "count": expected integer, got string`},
		{`{"count": 1, "e": "z"}`, `argument "e": must be one of "a b", "it's", 1, null, {"k":1}; got "z"`},
		{`{"count": 1, "c": 1}`, `argument "c": must be null, got 1`},
	}
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("https://x.invalid/s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("https://x.invalid/s.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.args))
		if err != nil {
			t.Fatal(err)
		}
		var verr *jsonschema.ValidationError
		if !errors.As(sch.Validate(inst), &verr) {
			t.Errorf("%s: valid, want %q", tt.args, tt.want)
			continue
		}
		if got := Describe(verr); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.args, got, tt.want)
		}
	}
}
