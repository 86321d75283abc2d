package config

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cexec/cexec/pluginapi"
)

// FuzzLoad feeds arbitrary bytes to the loader as a config file. Whatever
// the input, loading, formatting diagnostics, decoding plugin bodies and
// masking must not panic, and every error must carry a position.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.hcl")
	seeds = append(seeds, "../../cexec.hcl")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`plugin "selector" "x" { a = env("A", "b") }`))
	dir := f.TempDir()
	env := fakeEnv(map[string]string{"CEXEC_TEST_API_KEY": "k"})
	schema := pluginapi.ConfigSchema{
		Attributes: []pluginapi.Attribute{{Name: "max_hits", Type: "number", Required: true}, {Name: "x", Type: "any", Sensitive: true}},
		Blocks:     []pluginapi.NestedBlock{{TypeName: "b", List: true, Body: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{{Name: "y", Type: "list(string)"}}}}},
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := load(src, filepath.Join(dir, "fuzz.hcl"), Overrides{PluginDir: dir, LookupEnv: env})
		if err := FormatDiagnostics(io.Discard, diags, filesOf(cfg)); err != nil {
			t.Fatal(err)
		}
		if cfg == nil {
			return
		}
		for _, d := range diags {
			if d.Subject == nil {
				t.Errorf("diagnostic without a position: %s", d.Error())
			}
		}
		schemas := map[string]pluginapi.ConfigSchema{}
		for _, p := range cfg.Plugins {
			_, _ = DecodePluginBody(p, schema)
			_ = p.AttributeRange("b.0.y")
			schemas[p.Key()] = schema
		}
		if _, err := cfg.MaskedJSONWithSchemas(schemas); err != nil {
			t.Fatal(err)
		}
	})
}
