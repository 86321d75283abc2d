package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
)

// exampleSchema is the schema of the example plugin that pluginhost loads
// end to end.
var exampleSchema = pluginapi.ConfigSchema{
	Attributes: []pluginapi.Attribute{
		{Name: "max_hits", Type: "number", Required: true},
		{Name: "case_sensitive", Type: "bool"},
		{Name: "stopwords", Type: "list(string)"},
	},
}

// loadOne loads src as a config whose plugins all have fake binaries and
// returns the plugin kind/name.
func loadOne(t *testing.T, src string, kind pluginapi.Kind, name string, env map[string]string) *Plugin {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(bin, "cexec-plugin-"+string(kind)+"-"+name), "#!/bin/sh\n")
	file := filepath.Join(dir, "cexec.hcl")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(file, Overrides{LookupEnv: fakeEnv(env)})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	p := cfg.Plugin(kind, name)
	if p == nil {
		t.Fatalf("plugin %s/%s not loaded", kind, name)
	}
	return p
}

// TestFixturePluginSchema checks diagnostics from a schema the plugin itself
// declares: type mismatch, missing required attribute, unknown attribute.
func TestFixturePluginSchema(t *testing.T) {
	dir := pluginDir(t, standardPlugins...)
	cfg, diags := Load("testdata/plugin_body.hcl", Overrides{PluginDir: dir, LookupEnv: fakeEnv(nil)})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	p := cfg.Plugin(pluginapi.KindSelector, "example")
	out, diags := DecodePluginBody(p, exampleSchema)
	if out != nil {
		t.Errorf("got config %s despite errors", out)
	}
	var buf bytes.Buffer
	if err := FormatDiagnostics(&buf, diags, cfg.Files()); err != nil {
		t.Fatal(err)
	}
	t.Logf("diagnostics:\n%s", buf.String())
	checkDiags(t, diags, []wantDiag{
		{3, "Missing required argument", false},
		{4, "Incorrect attribute value type", false},
		{6, `Unsupported argument in plugin "selector" "example"`, false},
	})
}

func TestDecodePluginBody(t *testing.T) {
	schema := pluginapi.ConfigSchema{
		Attributes: []pluginapi.Attribute{
			{Name: "max_hits", Type: "number", Required: true},
			{Name: "case_sensitive", Type: "bool"},
			{Name: "stopwords", Type: "list(string)"},
			{Name: "weights", Type: "map(number)"},
			{Name: "extra", Type: "any"},
			{Name: "api_key", Type: "string", Sensitive: true},
			{Name: "unset", Type: "string"},
		},
		Blocks: []pluginapi.NestedBlock{
			{TypeName: "embeddings", Body: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
				{Name: "model", Type: "string", Required: true},
				{Name: "token", Type: "string"},
			}}},
			{TypeName: "rule", List: true, Body: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
				{Name: "pattern", Type: "string"},
				{Name: "value", Type: "any"},
			}}},
			{TypeName: "absent", Body: pluginapi.ConfigSchema{}},
		},
	}
	src := `plugin "selector" "s" {
  max_hits = 10
  case_sensitive = true
  stopwords = ["a", "b"]
  weights = { name = 2, description = 1.5 }
  extra = { nested = [1, "x"] }
  api_key = "literal-key"
  embeddings {
    model = "m"
    token = env("TOKEN")
  }
  rule {
    pattern = "x"
    value = 1
  }
  rule {
    value = "two"
  }
}
`
	p := loadOne(t, src, pluginapi.KindSelector, "s", map[string]string{"TOKEN": "tok-123"})
	out, diags := DecodePluginBody(p, schema)
	if diags.HasErrors() {
		t.Fatalf("decode: %s", diags.Error())
	}
	var got, want any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"max_hits":10,"case_sensitive":true,"stopwords":["a","b"],
		"weights":{"name":2,"description":1.5},"extra":{"nested":[1,"x"]},"api_key":"literal-key",
		"embeddings":{"model":"m","token":"tok-123"},
		"rule":[{"pattern":"x","value":1},{"value":"two"}]}`
	if err := json.Unmarshal([]byte(wantJSON), &want); err != nil {
		t.Fatal(err)
	}
	gotB, _ := json.Marshal(got)
	wantB, _ := json.Marshal(want)
	if !bytes.Equal(gotB, wantB) {
		t.Errorf("config\n got %s\nwant %s", gotB, wantB)
	}

	_, sensitive, _ := decodePluginBody(p, schema)
	var paths []string
	for _, s := range sensitive {
		paths = append(paths, strings.Join(s, "."))
	}
	for _, w := range []string{"api_key", "embeddings.token"} {
		if !strings.Contains(","+strings.Join(paths, ",")+",", ","+w+",") {
			t.Errorf("sensitive paths %v lack %s", paths, w)
		}
	}
}

func TestDecodePluginBodyErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		schema pluginapi.ConfigSchema
		want   []wantDiag // lines in a file where the plugin block starts on line 1
	}{
		{
			name:   "nested required attribute missing",
			body:   "  embeddings {\n    dims = 3\n  }\n",
			schema: pluginapi.ConfigSchema{Blocks: []pluginapi.NestedBlock{{TypeName: "embeddings", Body: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{{Name: "model", Type: "string", Required: true}, {Name: "dims", Type: "number"}}}}}},
			want:   []wantDiag{{2, "Missing required argument", false}},
		},
		{
			name:   "unknown block",
			body:   "  x = 1\n  cache {\n  }\n",
			schema: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{{Name: "x", Type: "number"}}},
			want:   []wantDiag{{3, `Unsupported block type in plugin "guard" "g"`, false}},
		},
		{
			name:   "list element type",
			body:   "  stopwords = [\"a\", [\"b\"]]\n",
			schema: exampleSchema,
			want:   []wantDiag{{1, "Missing required argument", false}, {2, "Incorrect attribute value type", false}},
		},
		{
			name:   "env unset in body",
			body:   "  max_hits = env(\"NOPE\")\n",
			schema: exampleSchema,
			want:   []wantDiag{{2, "Error in function call", false}},
		},
		{
			name:   "invalid schema type",
			body:   "",
			schema: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{{Name: "x", Type: "strin"}}},
			want:   []wantDiag{{1, "Invalid plugin config schema", false}},
		},
		{
			name:   "duplicate schema name",
			body:   "",
			schema: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{{Name: "x", Type: "string"}}, Blocks: []pluginapi.NestedBlock{{TypeName: "x"}}},
			want:   []wantDiag{{1, "Invalid plugin config schema", false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadOne(t, "plugin \"guard\" \"g\" {\n"+tt.body+"}\n", pluginapi.KindGuard, "g", nil)
			out, diags := DecodePluginBody(p, tt.schema)
			if out != nil {
				t.Errorf("got config %s despite errors", out)
			}
			checkDiags(t, diags, tt.want)
		})
	}
}

func TestAttributeRange(t *testing.T) {
	src := `plugin "codegen" "c" {
  command = "cexec-plugin-codegen-c"
  model   = "m"
  provider {
    name = "openai"
  }
  rule {
    pattern = "a"
  }
  rule {
    pattern = "b"
  }
}
`
	p := loadOne(t, src, pluginapi.KindCodegen, "c", nil)
	tests := []struct {
		path string
		line int
	}{
		{"command", 2},
		{"model", 3},
		{"provider", 4},
		{"provider.name", 5},
		{"provider.missing", 4},
		{"rule.1.pattern", 11},
		{"rule[1].pattern", 11},
		{"rule.pattern", 8},
		{"rule.7.pattern", 7},
		{"nothing", 1},
		{"", 1},
	}
	for _, tt := range tests {
		if got := p.AttributeRange(tt.path); got.Start.Line != tt.line {
			t.Errorf("AttributeRange(%q) = line %d, want %d", tt.path, got.Start.Line, tt.line)
		}
	}
}
