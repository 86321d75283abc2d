package stubgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzGenerate feeds arbitrary tool names and schemas to the generator: it must not panic,
// and every name it makes (package, function, parameter, **kwargs, type) must be a valid
// Python identifier, unique where it has to be. (Whether the output compiles is checked on
// real tool lists by TestStubsPassPython; running Python per fuzz input would be too slow.)
func FuzzGenerate(f *testing.F) {
	for _, s := range append(refServers(f), kitchenSink(f)) {
		for _, tl := range s.Tools {
			f.Add(tl.Name, []byte(tl.InputSchema), []byte(tl.OutputSchema))
		}
	}
	f.Add("x", []byte(`{"properties": {"a": {"$ref": "#"}, "b": {"allOf": [{"$ref": "#/properties/b"}]}}}`), []byte(`true`))
	f.Add("", []byte(`{"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/B"}]}, "B": {"items": {"$ref": "#/$defs/A"}}}, "properties": {"__init__": {"$ref": "#/$defs/A"}}}`), []byte(nil))
	f.Fuzz(func(t *testing.T, name string, input, output []byte) {
		tool := Tool{Name: name, Description: name, InputSchema: input, OutputSchema: output}
		p := Generate([]Server{{Name: name, Tools: []Tool{tool, tool}}})[0]
		if !IsIdentifier(p.Name) {
			t.Errorf("package name %q", p.Name)
		}
		if p.Stubs[0].Function == p.Stubs[1].Function {
			t.Errorf("duplicate tools share the function %q", p.Stubs[0].Function)
		}
		for _, st := range p.Stubs {
			src, ok := p.Files[st.Path]
			if !IsIdentifier(st.Function) || !ok || !strings.HasPrefix(string(src), Marker+"\n") || !utf8.Valid(src) {
				t.Errorf("stub %+v: function %q, file present %v", st, st.Function, ok)
			}
		}
		tm := buildTool("f", tool)
		seen := map[string]bool{}
		for _, prm := range tm.params {
			if !IsIdentifier(prm.name) || seen[prm.name] || bodyNames[prm.name] {
				t.Errorf("parameter %q for %q", prm.name, prm.orig)
			}
			seen[prm.name] = true
		}
		if tm.extra != nil && (!IsIdentifier(tm.extraName) || seen[tm.extraName]) {
			t.Errorf("**kwargs name %q", tm.extraName)
		}
		types := map[string]bool{}
		for _, defs := range []map[*jv]*typeDef{tm.mod.dicts, tm.mod.aliases} {
			for _, d := range defs {
				if !IsIdentifier(d.name) || types[d.name] || pyBuiltins[d.name] || moduleNames[d.name] || d.name == "f" {
					t.Errorf("type name %q", d.name)
				}
				types[d.name] = true
			}
		}
	})
}

// FuzzParseJSON checks the ordered parser against encoding/json: same acceptance, same
// values (numbers as written, duplicate keys resolved to the last value).
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, -2.5e3, "x\u00e9\"", true, null, {}], "a": {"b": []}}`, `"\ud800"`, "\"\xff\"", ` 0 `, `[`, `{"a" 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseJSON(data)
		if errors.Is(err, errTooDeep) {
			return // a limit of ours; encoding/json allows 10000 levels
		}
		// Acceptance is json.Valid's: numbers are kept as written, so
		// 1E1000, which overflows Unmarshal's float64, is valid for both.
		if valid := json.Valid(data); (err == nil) != valid {
			t.Fatalf("parseJSON error %v, json.Valid %v", err, valid)
		}
		if err != nil {
			return
		}
		var want any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		var got any
		gdec := json.NewDecoder(strings.NewReader(v.compact()))
		gdec.UseNumber()
		if err := gdec.Decode(&got); err != nil {
			t.Fatalf("re-encoded %q: %v", v.compact(), err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %#v, want %#v", got, want)
		}
	})
}
