package rules

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

func client(t *testing.T, cfg string) codegen.Codegen {
	t.Helper()
	c := plugintest.Codegen(t, &Generator{log: hclog.NewNullLogger()})
	plugintest.CheckInfo(t, c, pluginapi.KindCodegen)
	diags, err := c.Configure(context.Background(), json.RawMessage(cfg), codegen.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", err, diags)
	}
	return c
}

func tools(ids ...string) []codegen.Tool {
	var out []codegen.Tool
	for _, id := range ids {
		server, name, _ := strings.Cut(id, "/")
		out = append(out, codegen.Tool{ID: id, Server: server, Name: name})
	}
	return out
}

func TestGenerateOverGRPC(t *testing.T) {
	c := client(t, `{}`)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		task     string
		tools    []codegen.Tool
		wantRule string
		wantDiag string
	}{
		{"rule with its tool", "list files in notes", tools("filesystem/list_directory"), "rules/list_files", ""},
		{"needs no tools", "what is 6 * 7", nil, "rules/arithmetic", ""},
		{"tool not selected", "list files in notes", tools("memory/read_graph"), "", "not available"},
		{"no rule", "book me a flight to Rome", nil, "", "no rule matches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Generate(ctx, codegen.GenerateRequest{Task: tc.task, Tools: tc.tools, Language: "python"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Model != tc.wantRule {
				t.Fatalf("model = %q, want %q (diags %v)", resp.Model, tc.wantRule, resp.Diagnostics)
			}
			if (resp.Code != "") != (tc.wantRule != "") {
				t.Fatalf("code presence wrong: %q", resp.Code)
			}
			if tc.wantDiag != "" && !strings.Contains(fmtDiags(resp.Diagnostics), tc.wantDiag) {
				t.Fatalf("diagnostics %q lack %q", fmtDiags(resp.Diagnostics), tc.wantDiag)
			}
		})
	}
}

func TestUserRulesComeFirstAndBadFilesAreReported(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mine.hcl"), []byte(`rule "answer" {
  pattern  = "(?i)^what is 6 \\* 7$"
  template = "print(42)"
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"rules_dir": dir})
	c := client(t, string(cfg))
	resp, err := c.Generate(context.Background(), codegen.GenerateRequest{Task: "what is 6 * 7"})
	if err != nil || resp.Model != "rules/answer" {
		t.Fatalf("user rule not preferred: %v %q", err, resp.Model)
	}

	if err := os.WriteFile(filepath.Join(dir, "broken.hcl"), []byte("rule \"x\" {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := plugintest.Codegen(t, &Generator{log: hclog.NewNullLogger()})
	diags, err := g.Configure(context.Background(), cfg, codegen.APIVersion)
	if err != nil {
		t.Fatal(err)
	}
	if !diags.HasErrors() || diags[0].Attribute != "rules_dir" || !strings.Contains(diags[0].Detail, "broken.hcl:") {
		t.Fatalf("want a rules_dir diagnostic naming broken.hcl, got %+v", diags)
	}
}

func fmtDiags(d pluginapi.Diagnostics) string {
	var parts []string
	for _, x := range d {
		parts = append(parts, x.Summary+" "+x.Detail)
	}
	return strings.Join(parts, "; ")
}

// TestConfigureRejects checks that a misspelt or mistyped attribute, and an
// API version the plugin does not speak, are errors naming what is wrong.
func TestConfigureRejects(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, version, wantAttr, wantText string
	}{
		{"misspelt attribute", `{"rule_dir": "/tmp"}`, codegen.APIVersion, "rule_dir", "no attribute"},
		{"wrong type", `{"builtin": "yes"}`, codegen.APIVersion, "builtin", "Invalid type"},
		{"no API version", `{}`, "", "", "API version"},
		{"missing rules_dir", `{"rules_dir": "/nonexistent-cexec-rules/rules"}`, codegen.APIVersion, "rules_dir", "/nonexistent-cexec-rules/rules"},
		{"rules_dir a file", `{"rules_dir": "/etc/hostname"}`, codegen.APIVersion, "rules_dir", "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags, err := New(hclog.NewNullLogger()).Configure(context.Background(), json.RawMessage(tc.cfg), tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if !diags.HasErrors() || diags[0].Attribute != tc.wantAttr || !strings.Contains(fmtDiags(diags), tc.wantText) {
				t.Fatalf("diagnostics %+v, want attribute %q and %q", diags, tc.wantAttr, tc.wantText)
			}
		})
	}
}
