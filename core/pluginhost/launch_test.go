package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

func TestSHA256(t *testing.T) {
	sumOf := func(t *testing.T, path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(data)
		return hex.EncodeToString(s[:])
	}
	block := "plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n  sha256  = %q\n}\n"

	t.Run("match starts", func(t *testing.T) {
		dir := pluginDir(t)
		cfg, _ := loadConfig(t, dir, fmt.Sprintf(block, sumOf(t, filepath.Join(dir, envBin))))
		if _, diags := startHost(t, cfg, hclog.NewNullLogger()); diags.HasErrors() {
			t.Fatalf("start with the right sha256: %s", diags.Error())
		}
	})

	t.Run("binary replaced after load is refused", func(t *testing.T) {
		dir := pluginDir(t)
		env := filepath.Join(dir, envBin)
		cfg, src := loadConfig(t, dir, fmt.Sprintf(block, sumOf(t, env)))
		// Swap in another plugin binary under the same name.
		if err := os.Remove(env); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join(builtDir, keywordBin), env)
		h, diags := startHost(t, cfg, hclog.NewNullLogger())
		if !diags.HasErrors() {
			t.Fatal("Start ran a binary whose sha256 does not match")
		}
		d := diags.Errs()[0].Error()
		if !strings.Contains(d, "checksum mismatch") || !strings.Contains(d, fmt.Sprintf(":%d,", lineOf(t, src, "sha256"))) {
			t.Errorf("diagnostic %q: want a checksum mismatch at the sha256 line", d)
		}
		if s := statusOf(t, h, pluginapi.KindSelector, "env"); s.PID != 0 || s.State != StateFailed {
			t.Errorf("status %+v, want failed without a process", s)
		}
	})

	t.Run("go-plugin SecureConfig refuses a mismatching binary", func(t *testing.T) {
		// CheckBinary normally catches a mismatch first; this checks the
		// second line of defence, go-plugin's own check right before exec.
		dir := pluginDir(t)
		cfg, _ := loadConfig(t, dir, fmt.Sprintf(block, sumOf(t, filepath.Join(dir, envBin))))
		p := cfg.Plugins[0]
		client, _, err := newClient(p, filepath.Join(dir, keywordBin), 10*time.Second, hclog.NewNullLogger(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Kill()
		if _, err := client.Client(); err == nil || !strings.Contains(err.Error(), "checksums did not match") {
			t.Fatalf("client for a binary with another sha256 started: %v", err)
		}
	})
}

// TestEnvironmentIsolation: a secret in the daemon's environment does not
// reach the plugin; the plugin block's env and the minimal base do.
func TestEnvironmentIsolation(t *testing.T) {
	t.Setenv("CEXEC_TEST_SECRET", "hunter2")
	t.Setenv("LANG", "C.UTF-8")
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, `
plugin "selector" "env" {
  command = "envplugin"
  env     = { GIVEN_TO_PLUGIN = "yes" }
}
`)
	h, diags := startHost(t, cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: io.Discard}))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	sel, err := h.Selector("env")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := sel.Search(context.Background(), selector.SearchRequest{Query: "env"})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, hit := range resp.Hits {
		k, v, _ := strings.Cut(hit.ID, "=")
		env[k] = v
	}
	for k, v := range env {
		if strings.Contains(v, "hunter2") || k == "CEXEC_TEST_SECRET" {
			t.Errorf("daemon secret visible to the plugin as %s", k)
		}
	}
	want := map[string]string{"GIVEN_TO_PLUGIN": "yes", "LANG": "C.UTF-8", "PATH": os.Getenv("PATH"), pluginapi.LogLevelEnv: "info"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("plugin sees %s=%q, want %q", k, env[k], v)
		}
	}
	allowed := []string{"PATH", "HOME", "TMPDIR", "LANG", "GIVEN_TO_PLUGIN", pluginapi.LogLevelEnv}
	for k := range env {
		// go-plugin's handshake variables are the only others.
		if !slices.Contains(allowed, k) && !strings.HasPrefix(k, "PLUGIN_") && k != pluginapi.Handshake.MagicCookieKey {
			t.Errorf("unexpected variable %s in the plugin's environment", k)
		}
	}
}

// TestCommandRecheckedAtLaunch: a binary replaced by a symlink leading out
// of plugin_dir after the config was loaded is not run.
func TestCommandRecheckedAtLaunch(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, "plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n}\n")
	outside := filepath.Join(t.TempDir(), "evil")
	copyFile(t, filepath.Join(builtDir, envBin), outside)
	env := filepath.Join(dir, envBin)
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, env); err != nil {
		t.Fatal(err)
	}
	diags := Validate(context.Background(), cfg, hclog.NewNullLogger())
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "outside plugin_dir") {
		t.Errorf("symlink escape not refused at launch: %v", diags)
	}
}

func TestPluginEnv(t *testing.T) {
	t.Setenv("PATH", "/opt/bin")
	t.Setenv("HOME", "/home/u")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	tests := []struct {
		name  string
		extra map[string]string
		level hclog.Level
		want  []string
	}{
		{"base only", nil, hclog.NoLevel, []string{"HOME=/home/u", "PATH=/opt/bin"}},
		{"block env wins", map[string]string{"PATH": "/x", "OPENAI_API_KEY": "given"}, hclog.Warn,
			[]string{"CEXEC_PLUGIN_LOG_LEVEL=warn", "HOME=/home/u", "OPENAI_API_KEY=given", "PATH=/x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.DeleteFunc(pluginEnv(tc.extra, tc.level), func(kv string) bool {
				// TMPDIR and LANG depend on the machine.
				return strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, "LANG=")
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("pluginEnv = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSecretsMaskedInPluginLogs: a value from env() that a plugin logs (its
// own config, a server's error quoting a key) is masked in cexecd's log, as
// cexec.hcl promises for every env() value.
func TestSecretsMaskedInPluginLogs(t *testing.T) {
	dir := pluginDir(t)
	const secret = "sk-greeting-0123456789"
	cfg, _ := loadConfig(t, dir, `
plugin "selector" "env" {
  command  = "envplugin"
  greeting = env("CEXEC_TEST_NOT_SET", "`+secret+`")
}
`)
	log, buf := testLogger(t)
	h, diags := startHost(t, cfg, log)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	sel, err := h.Selector("env")
	if err != nil {
		t.Fatal(err)
	}
	// The plugin logs each query too.
	if _, err := sel.Search(context.Background(), selector.SearchRequest{Query: "x " + secret}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "search") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l := buf.String(); strings.Contains(l, secret) || !strings.Contains(l, "(sensitive)") {
		t.Errorf("plugin log lines not masked:\n%s", l)
	}
}

// TestPluginRunsInConfigDir: a plugin starts in the directory of cexec.hcl,
// so a relative path in its block (rules_dir, cache_dir, python) means what
// cexec.hcl says of every relative path: relative to the file.
func TestPluginRunsInConfigDir(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, "plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n}\n")
	h, diags := startHost(t, cfg, hclog.NewNullLogger())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	sel, err := h.Selector("env")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := sel.Search(context.Background(), selector.SearchRequest{Query: "cwd"})
	if err != nil || len(resp.Hits) != 1 {
		t.Fatalf("cwd: %v %v", resp.Hits, err)
	}
	want, err := filepath.EvalSymlinks(filepath.Dir(cfg.Path))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Hits[0].ID; got != want {
		t.Errorf("plugin runs in %s, want the config's directory %s", got, want)
	}
}
