package guard_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

var (
	buildOnce sync.Once
	builtPII  string
	buildErr  error
)

// guardPIIBinary builds plugins/guard-pii once per test binary; TestMain
// removes it.
func guardPIIBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the guard-pii plugin")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "guard-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtPII = filepath.Join(dir, "cexec-plugin-guard-pii")
		buildErr = testutil.GoBuild(builtPII, "./plugins/guard-pii")
	})
	if buildErr != nil {
		t.Fatalf("build guard-pii: %v", buildErr)
	}
	return builtPII
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtPII != "" {
		_ = os.RemoveAll(filepath.Dir(builtPII))
	}
	os.Exit(code)
}

// TestStrictWithKilledPluginProcess runs the real guard-pii plugin as a
// process, the way cexecd does (go-plugin, gRPC, the guard adapter),
// tokenizes through it, kills it with SIGKILL and checks that a strict
// or default tenant's output is withheld, while one with pii_fail_open
// gets it unchecked with a warning.
func TestStrictWithKilledPluginProcess(t *testing.T) {
	bin := guardPIIBinary(t)
	proc := plugintest.Launch(t, bin, pluginapi.KindGuard, &guardapi.GRPCPlugin{})
	client := proc.Client
	pii := proc.Plugin.(guardapi.Guard)
	if diags, err := pii.Configure(t.Context(), []byte(`{}`), guardapi.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("Configure = %v, %v", diags, err)
	}

	var logs logBuffer
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir(), Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := guard.New(guard.Options{
		Guards:   []guard.Named{{Name: "pii", Plugin: pii}},
		Policies: map[string]*policy.Policy{"strict": {Strict: true}, "default": {}, "lenient": {PIIFailOpen: true}},
		Vaults:   store,
		Logger:   logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	strict, err := gr.Open("strict", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	lenient, err := gr.Open("lenient", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer lenient.Close()
	def, err := gr.Open("default", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	if !logs.contains(`"pii_fail_open: while a guard cannot detect, this tenant's model-facing output goes out untokenized"`) {
		t.Errorf("no warning at start for pii_fail_open:\n%s", logs.String())
	}

	const text = "contact alice@example.com or (212) 555-0100"
	for _, s := range []*guard.Session{strict, def, lenient} {
		out, err := s.Tokenize(t.Context(), text)
		if err != nil || out != "contact [EMAIL_1] or [PHONE_1]" {
			t.Fatalf("Tokenize through the plugin = %q, %v", out, err)
		}
	}

	pid := client.ReattachConfig().Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !client.Exited(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the plugin did not exit")
		}
	}

	for name, s := range map[string]*guard.Session{"strict": strict, "default": def} {
		out, err := s.Tokenize(t.Context(), "new value bob@example.org")
		var d *guard.Denial
		if out != "" || !errors.As(err, &d) || d.Guard != "pii" || !errors.Is(err, pluginapi.ErrPluginShutdown) {
			t.Errorf("%s Tokenize after the kill = %q, %v; want no output and a Denial wrapping ErrPluginShutdown", name, out, err)
		}
	}
	// The pii_fail_open tenant gets its text unchecked, with a warning;
	// its vault still restores the tokens it issued.
	out, err := lenient.Tokenize(t.Context(), "new value bob@example.org")
	if err != nil || out != "new value bob@example.org" {
		t.Errorf("pii_fail_open Tokenize after the kill = %q, %v", out, err)
	}
	if back, err := lenient.Untokenize("[EMAIL_1]"); err != nil || back != "alice@example.com" {
		t.Errorf("vault after the plugin died: %q, %v", back, err)
	}
	if !logs.contains(`"guard unavailable, continuing without it (policy not strict)"`) {
		t.Errorf("no warning for the pii_fail_open tenant:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "alice@example.com") || strings.Contains(logs.String(), "bob@example.org") {
		t.Errorf("logs contain a value:\n%s", logs.String())
	}
}

// TestObfuscatedPIIThroughThePlugin tokenizes values hidden by fullwidth
// forms and zero-width characters through the real guard-pii plugin and a
// vault: the original bytes are replaced, and the tokens restore them.
func TestObfuscatedPIIThroughThePlugin(t *testing.T) {
	bin := guardPIIBinary(t)
	proc := plugintest.Launch(t, bin, pluginapi.KindGuard, &guardapi.GRPCPlugin{})
	pii := proc.Plugin.(guardapi.Guard)
	if diags, err := pii.Configure(t.Context(), []byte(`{}`), guardapi.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("Configure = %v, %v", diags, err)
	}
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := guard.New(guard.Options{Guards: []guard.Named{{Name: "pii", Plugin: pii}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gr.Open("acme", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const wide, zw = "ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ", "bob\u200b@exa\u200dmple.org"
	out, err := s.Tokenize(t.Context(), "mail "+wide+" and "+zw+" now")
	if err != nil || out != "mail [EMAIL_1] and [EMAIL_2] now" {
		t.Fatalf("Tokenize = %q, %v", out, err)
	}
	for tok, want := range map[string]string{"[EMAIL_1]": wide, "[EMAIL_2]": zw} {
		if back, err := s.Untokenize(tok); err != nil || back != want {
			t.Errorf("Untokenize(%s) = %q, %v; want %q", tok, back, err, want)
		}
	}
}
