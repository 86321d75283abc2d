package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// TestMakeInstall runs `make install DESTDIR=...` on the binaries this
// suite built and checks the layout: binaries in $PREFIX/bin, plugins in
// $PREFIX/lib/cexec/plugins, the shared skills and workflows (read from
// beside skills_dir), the example config in /etc/cexec (valid, and
// naming that plugin directory), the systemd unit (which
// systemd-analyze verify accepts when it is installed); a second install
// keeps the edited config.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		testutil.SkipMissing(t, "make is not installed")
	}
	dest := t.TempDir()
	install := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// -o build: the suite's binaries are already built, into bins.dir.
		cmd := exec.CommandContext(ctx, "make", "-o", "build", "install", "DESTDIR="+dest, "BIN="+bins.dir, "PLUGIN_BIN="+bins.pluginDir)
		cmd.Dir = testutil.ModuleRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
		return string(out)
	}
	install()
	for _, p := range []string{
		"usr/local/bin/cexecd", "usr/local/bin/cexecctl", "usr/local/bin/cexecctl-bench",
		"usr/local/lib/cexec/plugins/cexec-plugin-sandbox-bwrap",
		"usr/local/lib/cexec/plugins/cexec-plugin-guard-pii",
		"usr/local/share/cexec/skills", "usr/local/share/cexec/workflows/fill-pdf-form.yaml", "usr/local/share/doc/cexec/OPERATIONS.md",
		"usr/local/share/doc/cexec/TRACING.md", "usr/local/share/doc/cexec/WORKFLOWS.md",
		"etc/cexec/cexec.hcl", "lib/systemd/system/cexecd.service",
	} {
		if _, err := os.Stat(filepath.Join(dest, p)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	cfgPath := filepath.Join(dest, "etc/cexec/cexec.hcl")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), `plugin_dir  = "/usr/local/lib/cexec/plugins"`) || !strings.Contains(string(cfg), `socket      = "/run/cexec/cexecd.sock"`) {
		t.Errorf("installed config does not name the installed layout:\n%s", cfg)
	}
	unit, err := os.ReadFile(filepath.Join(dest, "lib/systemd/system/cexecd.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/local/bin/cexecd -config /etc/cexec/cexec.hcl", "RuntimeDirectory=cexec", "StateDirectory=cexec",
		"ExecReload=kill -HUP $MAINPID", "ProtectSystem=strict", "Delegate=yes"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}

	// The installed config is valid with the installed plugins (the
	// overrides point at DESTDIR instead of the system paths).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	val := exec.CommandContext(ctx, filepath.Join(dest, "usr/local/bin/cexecd"), "validate", "-config", cfgPath,
		"-plugin-dir", filepath.Join(dest, "usr/local/lib/cexec/plugins"), "-data-dir", filepath.Join(dest, "var/lib/cexec"),
		"-socket", filepath.Join(dest, "run/cexec/cexecd.sock"))
	if out, err := val.CombinedOutput(); err != nil || !strings.Contains(string(out), "configuration is valid") {
		t.Errorf("cexecd validate on the installed config: %v\n%s", err, out)
	}

	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		// verify wants ExecStart's binary to exist: point it into DESTDIR.
		staged := filepath.Join(t.TempDir(), "cexecd.service")
		if err := os.WriteFile(staged, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/", filepath.Join(dest, "usr/local/bin")+"/")), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(ctx, sa, "verify", staged).CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze is not installed: the unit's syntax was not verified")
	}

	// A second install keeps the operator's config.
	if err := os.WriteFile(cfgPath, append(cfg, "# edited\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := install(); !strings.Contains(out, "kept") {
		t.Errorf("second install did not say it kept the config:\n%s", out)
	}
	if b, _ := os.ReadFile(cfgPath); !strings.HasSuffix(string(b), "# edited\n") {
		t.Error("second install overwrote the config")
	}
	if _, err := os.Stat(cfgPath + ".dist"); err != nil {
		t.Errorf("no cexec.hcl.dist beside the kept config: %v", err)
	}
}
