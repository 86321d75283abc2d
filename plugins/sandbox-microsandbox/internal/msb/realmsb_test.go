package msb

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// These tests run the real msb from the npm package
// @superradcompany/microsandbox-linux-x64-gnu, which scripts/deps.sh
// installs under test/peers. Each uses its own MSB_HOME.

// realMSB returns the path of the real msb, skipping when it is not
// installed (CEXEC_MSB names another one).
func realMSB(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CEXEC_MSB"); p != "" {
		return p
	}
	p := filepath.Join(testutil.ModuleRoot(), "test", "peers", "node_modules", "@superradcompany", "microsandbox-linux-x64-gnu", "bin", "msb")
	if _, err := os.Stat(p); err != nil {
		testutil.SkipMissing(t, "the real msb is not installed at %s: run scripts/deps.sh", p)
	}
	return p
}

// realDoctor runs `msb doctor` itself: the truth the plugin's probe is
// checked against.
func realDoctor(t *testing.T, msb, home string) (bool, string) {
	t.Helper()
	cmd := exec.Command(msb, "doctor")
	cmd.Env = append(os.Environ(), "MSB_HOME="+home, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run msb doctor: %v", err)
	}
	return err == nil, string(out)
}

func realConfig(msb, home string, extra map[string]any) json.RawMessage {
	c := map[string]any{"msb": msb, "msb_home": home}
	for k, v := range extra {
		c[k] = v
	}
	b, _ := json.Marshal(c)
	return b
}

func TestRealMSB_Version(t *testing.T) {
	msb := realMSB(t)
	c, err := resolveCLI(t.Context(), msb, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !versionAtLeast(c.version, minVersion) {
		t.Errorf("version %v", c.version)
	}
}

// TestRealMSB_Doctor checks that the plugin reports what msb doctor finds:
// available where it passes, otherwise unavailable with doctor's error.
func TestRealMSB_Doctor(t *testing.T) {
	msb := realMSB(t)
	home := t.TempDir()
	ok, out := realDoctor(t, msb, home)
	t.Logf("msb doctor passes: %v\n%s", ok, out)
	p := New(nil)
	defer p.Close()
	diags, err := p.Configure(t.Context(), realConfig(msb, home, nil), sandbox.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}
	caps, err := p.Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if caps.Available != ok {
		t.Fatalf("available %v, but msb doctor passes: %v (%s)", caps.Available, ok, caps.UnavailableReason)
	}
	if ok {
		if len(diags) != 0 {
			t.Errorf("diagnostics on a KVM host: %v", diags)
		}
		return
	}
	// The reason is doctor's own error line, with its hints.
	var first string
	for _, l := range strings.Split(out, "\n") {
		if msg, found := strings.CutPrefix(l, "error: "); found {
			first = msg
			break
		}
	}
	if first == "" || !strings.HasPrefix(caps.UnavailableReason, unavailablePrefix+"msb doctor: "+first) {
		t.Errorf("reason %q, want doctor's error %q", caps.UnavailableReason, first)
	}
	if len(diags) != 1 || diags[0].Severity != pluginapi.SeverityWarning || diags[0].Detail != caps.UnavailableReason {
		t.Errorf("diagnostics %+v", diags)
	}
}

// TestRealMSB_FailurePath runs where microVMs cannot boot (this machine:
// no hardware virtualisation): Create refuses at once and leaves nothing in
// msb.
func TestRealMSB_FailurePath(t *testing.T) {
	msb := realMSB(t)
	home := t.TempDir()
	if ok, _ := realDoctor(t, msb, home); ok {
		t.Skip("msb doctor passes here; the boot test covers this machine")
	}
	p := New(nil)
	defer p.Close()
	if diags, err := p.Configure(t.Context(), realConfig(msb, home, nil), sandbox.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}
	_, err := p.Create(t.Context(), sandbox.CreateRequest{ID: "x", Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}})
	if !errors.Is(err, pluginapi.ErrUnavailable) || !strings.Contains(err.Error(), unavailablePrefix+"msb doctor: ") {
		t.Errorf("create: %v", err)
	}
	c := &cli{path: msb, home: home}
	list, err := c.list(t.Context())
	if err != nil || len(list) != 0 {
		t.Errorf("msb list: %v %v", list, err)
	}
}

// TestRealMSB_CommandErrors checks that failures of the real msb are read
// as msb's own: its exit statuses and "error:" lines.
func TestRealMSB_CommandErrors(t *testing.T) {
	c := &cli{path: realMSB(t), home: t.TempDir()}
	ctx := t.Context()
	tests := []struct {
		name     string
		args     []string
		code     int
		message  string
		notFound bool
	}{
		{"inspect a missing sandbox", []string{"inspect", "nope", "--format", "json"}, 1, "sandbox not found: nope", true},
		{"exec in a missing sandbox", []string{"exec", "--quiet", "--stream", "nope", "--", "true"}, 1, "sandbox not found: nope", true},
		{"stop a missing sandbox", []string{"stop", "nope"}, 1, "sandbox not found: nope", true},
		{"unknown flag", []string{"create", "--bogus", "python"}, 2, "unexpected argument '--bogus' found", false},
		{"unknown command", []string{"fly"}, 2, "unrecognized subcommand 'fly'", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.run(ctx, tc.args...)
			var ce *CommandError
			if !errors.As(err, &ce) || ce.ExitCode != tc.code || !strings.HasPrefix(ce.Message, tc.message) || ce.notFound() != tc.notFound {
				t.Errorf("error %#v, want exit status %d and %q", err, tc.code, tc.message)
			}
		})
	}
	if err := c.remove(ctx, "nope"); err != nil {
		t.Errorf("removing a missing sandbox: %v", err)
	}
	for _, args := range [][]string{{"list", "--format", "json"}, {"metrics", "--format", "json"}} {
		out, err := c.run(ctx, args...)
		if err != nil || strings.TrimSpace(string(out)) != "[]" {
			t.Errorf("msb %s: %q %v", args[0], out, err)
		}
	}
}

// TestRealMSB_Boot boots a real microVM where msb doctor passes: the
// standard runtime, a tool call and cleanup. It pulls the image on first
// use (CEXEC_MSB_TEST_IMAGE, default python:3.12-slim).
func TestRealMSB_Boot(t *testing.T) {
	msb := realMSB(t)
	home := t.TempDir()
	if ok, out := realDoctor(t, msb, home); !ok {
		t.Skipf("microVMs cannot boot here, msb doctor says:\n%s", out)
	}
	extra := map[string]any{"boot_timeout": "10m"}
	if img := os.Getenv("CEXEC_MSB_TEST_IMAGE"); img != "" {
		extra["image"] = img
	}
	_, sb := configured(t, realConfig(msb, home, extra))
	servers, skills := stubTree(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	ws := t.TempDir()
	began := time.Now()
	if _, err := sb.Create(ctx, sandbox.CreateRequest{ID: "boot", Tenant: "t", Env: map[string]string{"CEXEC_TEST": "yes"}, Mounts: []sandbox.Mount{
		{Source: ws, Target: "/workspace"},
		{Source: servers, Target: "/cexec/servers", ReadOnly: true},
		{Source: skills, Target: "/cexec/skills", ReadOnly: true},
	}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Logf("first boot (with the image pull) took %s", time.Since(began))
	checkCases(t, sb, "boot", append(append([]execCase{}, commonCases...), callCases...))
	if got, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(got) != "hi" {
		t.Errorf("workspace file on the host: %q %v", got, err)
	}
	h := &plugintest.Host{}
	res := run(t, sb, sandbox.ExecRequest{SandboxID: "boot", Code: "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n    print('connected')\nexcept OSError:\n    print('no network')"}, h)
	if res.ExitCode != 0 || h.Stdout() != "no network\n" {
		t.Errorf("network probe: %+v %q", res, h.Stdout())
	}
	if err := sb.Destroy(ctx, "boot"); err != nil {
		t.Fatal(err)
	}
	c := &cli{path: msb, home: home}
	if list, err := c.list(ctx); err != nil || len(list) != 0 {
		t.Errorf("msb list after destroy: %v %v", list, err)
	}
}
