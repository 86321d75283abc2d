package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

func TestStartListsPluginsOK(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, `
plugin "selector" "keyword" {
  command  = "plugin-selector-keyword"
  max_hits = 5
}

plugin "selector" "env" {
  command  = "envplugin"
  greeting = "hello"
}

pipeline {
  selector = "keyword"
}
`)
	log, logs := testLogger(t)
	h, diags := startHost(t, cfg, log)
	if diags.HasErrors() {
		t.Fatalf("start: %s", diags.Error())
	}
	st := h.Status()
	if len(st) != 2 {
		t.Fatalf("status has %d plugins, want 2", len(st))
	}
	for _, s := range st {
		if s.State != StateOK || s.APIVersion != "v1" || s.Version == "" || s.PID <= 0 || s.Restarts != 0 || !s.Required {
			t.Errorf("status %+v: want ok, api v1, a version, a pid, no restarts, required", s)
		}
	}

	kw, err := h.Selector("keyword")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := kw.Index(ctx, selector.IndexRequest{Upserts: []selector.Document{
		{ID: "fs/read_file", Kind: "tool", Server: "fs", Name: "read_file", Description: "Read a file from disk", ContentHash: "1"},
		{ID: "web/fetch", Kind: "tool", Server: "web", Name: "fetch", Description: "Fetch a web page", ContentHash: "2"},
	}}); err != nil {
		t.Fatalf("index: %v", err)
	}
	resp, err := kw.Search(ctx, selector.SearchRequest{Query: "read file", Limit: 5})
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	if len(resp.Hits) == 0 || resp.Hits[0].ID != "fs/read_file" {
		t.Errorf("search hits %+v, want fs/read_file first", resp.Hits)
	}

	// The env plugin logged its greeting at Configure; the host re-logs it
	// under the plugin's name.
	var relogged bool
	for _, l := range strings.Split(logs.String(), "\n") {
		relogged = relogged || strings.Contains(l, "[INFO]  cexecd.selector.env: configured:") && strings.Contains(l, "greeting=hello")
	}
	if !relogged {
		t.Errorf("plugin log line not re-logged under cexecd.selector.env; host log:\n%s", logs)
	}

	if _, err := h.Selector("nope"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("Selector(nope) = %v, want ErrNotFound", err)
	}
	if _, err := h.Guard("keyword"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("Guard(keyword) = %v, want ErrNotFound (it is a selector)", err)
	}
	base, err := h.Plugin(pluginapi.KindSelector, "keyword")
	if err != nil {
		t.Fatal(err)
	}
	info, err := base.Info(ctx)
	if err != nil || info.Kind != pluginapi.KindSelector {
		t.Errorf("Info through handle = %+v, %v", info, err)
	}
	if _, err := base.Configure(ctx, []byte(`{}`), "v1"); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("Configure through handle = %v, want ErrInvalidArgument", err)
	}

	pids := []int{st[0].PID, st[1].PID}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h.Stop(stopCtx)
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("plugin process %d still exists after Stop (kill 0: %v)", pid, err)
		}
	}
	if _, err := kw.Search(ctx, selector.SearchRequest{Query: "x"}); !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Errorf("search after Stop = %v, want ErrPluginShutdown", err)
	}
	for _, s := range h.Status() {
		if s.State != StateDisabled || s.PID != 0 {
			t.Errorf("after Stop: %+v, want disabled without pid", s)
		}
	}
}

// TestPluginConfigErrors: mistakes caught by the schema the plugin declares
// and by its Configure point at the offending line of cexec.hcl.
func TestPluginConfigErrors(t *testing.T) {
	dir := pluginDir(t)
	tests := []struct {
		name    string
		body    string
		marker  string // the line the diagnostic must point at
		summary string // part of the diagnostic's summary or detail
	}{
		{
			name:    "type mismatch against declared schema",
			body:    "plugin \"selector\" \"keyword\" {\n  command  = \"plugin-selector-keyword\"\n  max_hits = \"lots\"\n}\n",
			marker:  `max_hits = "lots"`,
			summary: "number",
		},
		{
			name:    "list attribute given a bool",
			body:    "plugin \"selector\" \"keyword\" {\n  command   = \"plugin-selector-keyword\"\n  max_hits  = 3\n  stopwords = true\n}\n",
			marker:  "stopwords = true",
			summary: "list",
		},
		{
			name:    "missing required attribute",
			body:    "plugin \"selector\" \"keyword\" {\n  command = \"plugin-selector-keyword\"\n}\n",
			marker:  `plugin "selector" "keyword"`,
			summary: "max_hits",
		},
		{
			name:    "unknown attribute",
			body:    "plugin \"selector\" \"keyword\" {\n  command  = \"plugin-selector-keyword\"\n  max_hits = 3\n  colour   = \"red\"\n}\n",
			marker:  `colour   = "red"`,
			summary: "colour",
		},
		{
			name:    "Configure range error with attribute path",
			body:    "plugin \"selector\" \"keyword\" {\n  command  = \"plugin-selector-keyword\"\n\n  max_hits = 5000\n}\n",
			marker:  "max_hits = 5000",
			summary: "max_hits",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, src := loadConfig(t, dir, tc.body)
			diags := Validate(context.Background(), cfg, hclog.NewNullLogger())
			errs := diags.Errs()
			if len(errs) == 0 {
				t.Fatalf("Validate found no error; diags: %v", diags)
			}
			want := lineOf(t, src, tc.marker)
			var found bool
			for _, d := range diags {
				if d.Severity != hcl.DiagError || d.Subject == nil {
					continue
				}
				text := d.Summary + " " + d.Detail
				if d.Subject.Filename == cfg.Path && d.Subject.Start.Line == want && strings.Contains(text, tc.summary) {
					found = true
					t.Logf("%s", d.Error())
				}
			}
			if !found {
				t.Errorf("no error at %s:%d mentioning %q; got: %v", cfg.Path, want, tc.summary, diags)
			}
		})
	}
}

// TestStartStopsOnConfigError: Start (not only Validate) refuses a plugin
// whose Configure rejects its block, and leaves nothing running.
func TestStartStopsOnConfigError(t *testing.T) {
	dir := pluginDir(t)
	cfg, src := loadConfig(t, dir, `
plugin "selector" "env" {
  command = "envplugin"
}

plugin "selector" "keyword" {
  command  = "plugin-selector-keyword"
  max_hits = 0
}

pipeline {
  selector = "keyword"
}
`)
	h, diags := startHost(t, cfg, hclog.NewNullLogger())
	if !diags.HasErrors() {
		t.Fatalf("Start accepted max_hits = 0: %v", diags)
	}
	if got, want := diags.Errs()[0].Error(), fmt.Sprintf("%s:%d", cfg.Path, lineOf(t, src, "max_hits = 0")); !strings.HasPrefix(got, want) {
		t.Errorf("error %q does not start with %s", got, want)
	}
	if s := statusOf(t, h, pluginapi.KindSelector, "env"); s.State == StateOK || s.PID != 0 {
		t.Errorf("env plugin left running after a failed Start: %+v", s)
	}
}

// TestStartErrorExtra: a plugin that could not be started carries a
// StartError naming it, so the daemon can tell that from a mistake in its
// block, which carries none.
func TestStartErrorExtra(t *testing.T) {
	dir := pluginDir(t)
	if err := os.WriteFile(filepath.Join(dir, "crash"), []byte("#!/bin/sh\necho 'no model file' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		body string
		want string // the StartError's text, "" for none
	}{
		// Whether go-plugin sees the exit or the end of output first
		// varies; what the plugin said comes last either way.
		{"process exits", "plugin \"selector\" \"crash\" {\n  command = \"crash\"\n}\n",
			"plugin selector.crash failed to start: "},
		{"another kind", "plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n  env = { ENVPLUGIN_KIND = \"guard\" }\n}\n",
			`plugin selector.env failed to start: `},
		{"Configure rejects the block", "plugin \"selector\" \"keyword\" {\n  command  = \"plugin-selector-keyword\"\n  max_hits = 0\n}\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := loadConfig(t, dir, tc.body)
			_, diags := startHost(t, cfg, hclog.NewNullLogger())
			if !diags.HasErrors() {
				t.Fatal("Start succeeded")
			}
			se, ok := hcl.DiagnosticExtra[*StartError](diags.Errs()[0].(*hcl.Diagnostic))
			switch {
			case tc.want == "" && ok:
				t.Errorf("a mistake in the block carries %q", se)
			case tc.want != "" && (!ok || !strings.HasPrefix(se.Error(), tc.want)):
				t.Errorf("StartError = %v, want %q; diags: %v", se, tc.want, diags)
			case tc.name == "process exits" && !strings.HasSuffix(se.Error(), "its stderr ended with: no model file"):
				t.Errorf("StartError = %v, want the plugin's stderr", se)
			}
		})
	}
}

// TestOptionalPluginFailure: required = false plugins that cannot start
// leave the daemon running; required ones stop it.
func TestOptionalPluginFailure(t *testing.T) {
	for _, required := range []bool{false, true} {
		t.Run(fmt.Sprintf("required=%v", required), func(t *testing.T) {
			dir := pluginDir(t)
			// An executable that dies before the go-plugin handshake.
			broken := "#!/bin/sh\necho 'broken plugin: missing library' >&2\nexit 3\n"
			if err := os.WriteFile(filepath.Join(dir, "broken"), []byte(broken), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg, src := loadConfig(t, dir, fmt.Sprintf(`
plugin "selector" "env" {
  command = "envplugin"
}

plugin "guard" "broken" {
  command  = "broken"
  required = %v
}
`, required))
			h, diags := startHost(t, cfg, hclog.NewNullLogger())
			failed := statusOf(t, h, pluginapi.KindGuard, "broken")
			if failed.State != StateFailed || !strings.Contains(failed.LastError, "broken plugin: missing library") {
				t.Errorf("broken plugin status %+v, want failed with the stderr that says why", failed)
			}
			line := lineOf(t, src, `plugin "guard" "broken"`)
			var at *hcl.Diagnostic
			for _, d := range diags {
				if d.Subject != nil && d.Subject.Start.Line == line {
					at = d
				}
			}
			if at == nil {
				t.Fatalf("no diagnostic at line %d: %v", line, diags)
			}
			t.Logf("severity %d: %s", at.Severity, at.Error())
			env := statusOf(t, h, pluginapi.KindSelector, "env")
			if required {
				if at.Severity != hcl.DiagError {
					t.Errorf("required plugin failure is %v, want an error", at.Severity)
				}
				if env.State == StateOK {
					t.Errorf("other plugin still running after a failed start: %+v", env)
				}
				return
			}
			if diags.HasErrors() || at.Severity != hcl.DiagWarning {
				t.Errorf("optional plugin failure gave %v, want only a warning", diags)
			}
			if env.State != StateOK {
				t.Errorf("env plugin %+v, want ok", env)
			}
			if _, err := h.Guard("broken"); !errors.Is(err, pluginapi.ErrPluginShutdown) {
				t.Errorf("Guard(broken) = %v, want ErrPluginShutdown", err)
			}
		})
	}
}

// TestInfoChecks: the host refuses plugins that report another kind or
// speak no API version it knows.
func TestInfoChecks(t *testing.T) {
	dir := pluginDir(t)
	tests := []struct {
		name, env, want string
	}{
		{"kind mismatch", `ENVPLUGIN_KIND = "guard"`, "Plugin kind mismatch"},
		{"no common API version", `ENVPLUGIN_API_VERSIONS = "v2,v3"`, "No common plugin API version"},
		{"newer versions too", `ENVPLUGIN_API_VERSIONS = "v1,v2"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := loadConfig(t, dir, fmt.Sprintf("plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n  env = { %s }\n}\n", tc.env))
			diags := Validate(context.Background(), cfg, hclog.NewNullLogger())
			if tc.want == "" {
				if diags.HasErrors() {
					t.Fatalf("unexpected errors: %s", diags.Error())
				}
				return
			}
			if !diags.HasErrors() || diags.Errs()[0].(*hcl.Diagnostic).Summary != tc.want {
				t.Errorf("diags %v, want %q", diags, tc.want)
			}
		})
	}
}

// TestStartErrorsSayWhatToDo: a binary that is not a cexec plugin of the
// configured kind fails with an error that names the cause and the fix,
// not go-plugin's or gRPC's wording alone.
func TestStartErrorsSayWhatToDo(t *testing.T) {
	dir := pluginDir(t)
	scripts := map[string]string{
		"garbage": "echo 'hello, I am not a plugin'\nexec sleep 20",
		"proto":   "echo '1|7|unix|/nonexistent.sock|grpc|'\nexec sleep 20",
		"core":    "echo '9|1|unix|/nonexistent.sock|grpc|'\nexec sleep 20",
		"silent":  "exec sleep 20",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, block string
		want        []string
	}{
		{"stdout garbage", `plugin "guard" "x" {
  command = "garbage"
}`, []string{`"hello, I am not a plugin"`, "stdout", "stderr"}},
		{"other plugin protocol", `plugin "guard" "x" {
  command = "proto"
}`, []string{"protocol version 7", "speaks 1", "rebuild"}},
		{"other go-plugin core protocol", `plugin "guard" "x" {
  command = "core"
}`, []string{"core protocol", "recompiled"}},
		{"no handshake", `plugin "guard" "x" {
  command = "silent"
  timeout = "500ms"
}`, []string{"500ms", "timeout"}},
		{"plugin of another kind", `plugin "guard" "x" {
  command = "` + keywordBin + `"
}`, []string{"is a selector plugin", `plugin "guard" "x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := loadConfig(t, dir, tc.block+"\n")
			diags := Validate(context.Background(), cfg, hclog.NewNullLogger())
			if !diags.HasErrors() {
				t.Fatal("no error")
			}
			msg := diags.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}
