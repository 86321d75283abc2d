package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testutil"
)

// TestReloadReportsChanges: a SIGHUP reload reports, in the log and the
// audit log, what the new file changed and nothing else; a reload of the
// same file, or of one whose policy only moved down, changed nothing.
func TestReloadReportsChanges(t *testing.T) {
	const acme = `
tenant "acme" {
  max_concurrent = 2
  policy {
    deny = ["memory/delete_*"]
    constraint "filesystem/write_file" {
      argument = "path"
      prefix   = "/data"
    }
    approval {
      tools = ["payments/*"]
    }
  }
}
`
	tests := []struct {
		name string
		// next is the reloaded file after the cexec and pipeline blocks.
		next string
		want []string
	}{
		{name: "same file", next: acme},
		{name: "the policy moved down", next: "\n# acme's\n\n" + acme},
		{name: "max_concurrent", next: strings.Replace(acme, "max_concurrent = 2", "max_concurrent = 3", 1),
			want: []string{"tenant limits of acme: max_concurrent"}},
		{name: "policy", next: strings.Replace(acme, "memory/delete_*", "memory/*", 1),
			want: []string{"tenant policy of acme"}},
		{name: "constraint", next: strings.Replace(acme, `"/data"`, `"/srv"`, 1),
			want: []string{"tenant policy of acme"}},
		{name: "tenant added", next: acme + "tenant \"beta\" {\n  allowed_servers = []\n}\n",
			want: []string{"tenant block beta added", "tenant limits of beta: allowed_servers"}},
		{name: "tenant removed", next: "",
			want: []string{"tenant block acme removed", "tenant limits of acme: max_concurrent", "tenant policy of acme"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			head := fmt.Sprintf("cexec {\n  data_dir = %q\n}\npipeline {\n  guards = []\n}\n", data)
			path := writeConfig(t, dir, head+acme)
			o := &Options{ConfigFile: path, Overrides: config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }}}
			cfg, diags := config.Load(path, o.Overrides)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			var logs bytes.Buffer
			log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
			s, err := newServices(cfg, nil, log)
			defer s.close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.startGuards(nil); err != nil {
				t.Fatal(err)
			}
			r := newReloader(o, cfg, s, log)
			writeConfig(t, dir, head+tt.next)
			logs.Reset()
			r.reload(context.Background())

			var got []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if _, change, ok := strings.Cut(line, "config reload applied: change="); ok {
					got = append(got, strings.Trim(change, `"`))
				}
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("logged as applied: %q, want %q\n%s", got, tt.want, logs.String())
			}
			if nothing := strings.Contains(logs.String(), "config reload: nothing changed"); nothing != (len(tt.want) == 0) {
				t.Errorf("the log says nothing changed: %t, want %t\n%s", nothing, len(tt.want) == 0, logs.String())
			}
			b, err := os.ReadFile(filepath.Join(data, "audit", "audit.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var e audit.Event
			if err := json.Unmarshal(bytes.TrimSpace(b), &e); err != nil {
				t.Fatalf("daemon audit log %s: want one event: %v", b, err)
			}
			if e.Type != audit.TypeConfigReload || e.Outcome != reloadApplied || e.Reason != strings.Join(tt.want, "; ") {
				t.Errorf("audit event %s, want reason %q", b, strings.Join(tt.want, "; "))
			}
		})
	}
}

// TestReloadSignIn: an oauth server added or changed by a reload is the one
// `cexecctl auth login` signs in to, and a changed oauth block restarts the
// server rather than going unnoticed.
func TestReloadSignIn(t *testing.T) {
	const remote = "mcp_server \"remote\" {\n  url      = \"http://127.0.0.1:1/mcp\"\n  optional = true\n  oauth {%s}\n}\n"
	tests := []struct {
		name       string
		first      string
		next       string
		want       string
		wantScopes []string
	}{
		{name: "added", next: fmt.Sprintf(remote, ""), want: `change="mcp_server remote added"`},
		{name: "moved down", first: fmt.Sprintf(remote, ""), next: "\n# remote\n" + fmt.Sprintf(remote, ""), want: "config reload: nothing changed"},
		{name: "scopes changed", first: fmt.Sprintf(remote, ""), next: fmt.Sprintf(remote, "\n    scopes = [\"read\"]\n  "),
			want: `change="mcp_server remote changed"`, wantScopes: []string{"read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			head := fmt.Sprintf("cexec {\n  data_dir = %q\n}\npipeline {\n  guards = []\n}\n", filepath.Join(dir, "data"))
			path := writeConfig(t, dir, head+tt.first)
			o := &Options{ConfigFile: path, Overrides: config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }}}
			cfg, diags := config.Load(path, o.Overrides)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			var logs testutil.Buffer
			log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
			s, err := newServices(cfg, nil, log)
			defer s.close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			r := newReloader(o, cfg, s, log)
			writeConfig(t, dir, head+tt.next)
			r.reload(context.Background())
			if !strings.Contains(logs.String(), tt.want) {
				t.Errorf("reload did not log %q:\n%s", tt.want, logs.String())
			}
			srv, _, err := s.auth.Resolve("remote", "")
			if err != nil {
				t.Fatalf("sign-in after the reload: %v", err)
			}
			if got := srv.OAuth.Scopes; !slices.Equal(got, tt.wantScopes) {
				t.Errorf("sign-in uses scopes %q, want the reloaded %q", got, tt.wantScopes)
			}
		})
	}
}

// TestReloadedConfigShown: `cexecctl config show` shows the config a
// reload applied, not the one cexecd started with.
func TestReloadedConfigShown(t *testing.T) {
	dir := t.TempDir()
	head := fmt.Sprintf("cexec {\n  data_dir = %q\n}\npipeline {\n  guards = []\n}\n", filepath.Join(dir, "data"))
	path := writeConfig(t, dir, head)
	o := &Options{ConfigFile: path, Overrides: config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }}}
	cfg, diags := config.Load(path, o.Overrides)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	log := hclog.NewNullLogger()
	s, err := newServices(cfg, nil, log)
	defer s.close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := newReloader(o, cfg, s, log)
	v := &configView{current: r.config, ov: o.Overrides, schemas: &schemaCache{}, log: log}
	writeConfig(t, dir, head+"mcp_server \"added\" {\n  url      = \"http://127.0.0.1:1/mcp\"\n  optional = true\n}\n")
	r.reload(context.Background())
	b, err := v.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"added"`)) {
		t.Errorf("config show after the reload lacks the added server:\n%s", b)
	}
}
