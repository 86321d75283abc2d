package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/config"
)

// machine writes a config with the bwrap sandbox plugin (a stand-in
// binary: doctor only hashes it) and a server run by npx.
func machine(t *testing.T) *config.Config {
	t.Helper()
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "cexec-plugin-sandbox-bwrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`cexec {
  data_dir   = %q
  socket     = %q
  plugin_dir = %q
}
plugin "sandbox" "bwrap" {}
pipeline {
  guards = []
}
mcp_server "memory" {
  command = "npx"
  args    = ["-y", "@modelcontextprotocol/server-memory"]
}
mcp_server "forms" {
  transport = "builtin"
}
`, filepath.Join(dir, "data"), filepath.Join(dir, "run", "cexecd.sock"), plugins)
	p := filepath.Join(dir, "cexec.hcl")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// Loading looks the server's command up; a stand-in npx keeps the test
	// from depending on Node.js being installed.
	servers := filepath.Join(dir, "servers")
	if err := os.MkdirAll(servers, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(servers, "npx"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if k == "PATH" {
			return servers, true
		}
		return os.LookupEnv(k)
	}
	cfg, diags := config.Load(p, config.Overrides{LookupEnv: lookup})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

func find(t *testing.T, checks []Check, name string) Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return Check{}
}

// TestMachineWithoutBubblewrap: with no bwrap (nor npx) in PATH the
// checks fail and say what to install.
func TestMachineWithoutBubblewrap(t *testing.T) {
	cfg := machine(t)
	checks := Run(context.Background(), cfg, Options{Path: t.TempDir()})
	bw := find(t, checks, "bubblewrap")
	if bw.Status != Fail || !strings.Contains(bw.Fix, "apt-get install bubblewrap") {
		t.Errorf("bubblewrap check %+v: want a failure saying to install bubblewrap", bw)
	}
	srv := find(t, checks, "mcp_server memory")
	if srv.Status != Fail || !strings.Contains(srv.Fix, "Node.js") {
		t.Errorf("server check %+v: want a failure saying to install Node.js", srv)
	}
	if !Failed(checks) {
		t.Error("Failed is false")
	}
	// Built into cexecd: nothing to find or dial, whatever the machine.
	if f := find(t, checks, "mcp_server forms"); f.Status != OK {
		t.Errorf("built-in server check %+v: want OK", f)
	}
	pl := find(t, checks, "plugin sandbox/bwrap")
	if pl.Status != OK || !strings.Contains(pl.Detail, "sha256 ") {
		t.Errorf("plugin check %+v: want its sha256", pl)
	}
}

// TestMachineWithBubblewrap: where bwrap is installed (this repository's
// machines) the check runs it.
func TestMachineWithBubblewrap(t *testing.T) {
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		t.Skip("no /usr/bin/bwrap")
	}
	checks := Run(context.Background(), machine(t), Options{Path: "/usr/bin:/bin"})
	if bw := find(t, checks, "bubblewrap"); bw.Status == Fail && strings.Contains(bw.Detail, "not found") {
		t.Errorf("bwrap not found: %+v", bw)
	}
	if py := find(t, checks, "python"); py.Status != OK {
		t.Errorf("python check %+v", py)
	}
	if s := find(t, checks, "socket directory"); s.Status != OK {
		t.Errorf("socket check %+v", s)
	}
}

// TestCgroups reads fake cgroup trees: v2 with and without the
// controllers, v1 hierarchies, none.
func TestCgroups(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string // path under the root: content ("" a folder)
		status string
		says   string
	}{
		{"v2", map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n"}, OK, "cgroup v2"},
		{"v2 without pids", map[string]string{"cgroup.controllers": "cpu memory\n"}, Warn, "without the pids"},
		{"v1", map[string]string{"memory": "", "pids": "", "cpu": ""}, OK, "cgroup v1"},
		{"v1 without pids", map[string]string{"memory": "", "cpu": ""}, Warn, "without pids"},
		{"none", nil, Warn, "no cgroup hierarchy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, content := range tt.files {
				var err error
				if content == "" {
					err = os.Mkdir(filepath.Join(root, p), 0o755)
				} else {
					err = os.WriteFile(filepath.Join(root, p), []byte(content), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			c := checkCgroups(&Options{CgroupRoot: root, ProcRoot: t.TempDir()})
			if c.Status != tt.status || !strings.Contains(c.Detail, tt.says) {
				t.Errorf("%+v: want %s saying %q", c, tt.status, tt.says)
			}
			if c.Status != OK && c.Fix == "" {
				t.Error("no fix")
			}
		})
	}
}

// TestSocketDir: the control socket's folder must not be writable by
// others, and cexecd serves MCP on the unix socket beside it only when the
// folder is 0700, so doctor says so rather than OK while the face is off.
func TestSocketDir(t *testing.T) {
	tests := []struct {
		mode   os.FileMode
		status string
		detail string
	}{
		{0o700, OK, "0700"},
		{0o755, Warn, "MCP"},
		{0o750, Warn, "MCP"},
		{0o777, Fail, "writable by others"},
		{os.ModeSticky | 0o777, Warn, "MCP"},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tt.mode); err != nil {
				t.Fatal(err)
			}
			c := checkSocketDir(filepath.Join(dir, "cexecd.sock"))
			if c.Status != tt.status || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("mode %v: %+v, want %s saying %q", tt.mode, c, tt.status, tt.detail)
			}
		})
	}
}
