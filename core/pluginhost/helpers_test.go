package pluginhost

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
)

// builtDir holds the plugin binaries TestMain builds once per test binary.
var builtDir string

const (
	keywordBin = "plugin-selector-keyword"
	envBin     = "envplugin"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pluginhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for out, pkg := range map[string]string{keywordBin: "./examples/" + keywordBin, envBin: "./core/pluginhost/testdata/envplugin"} {
		if err := testutil.GoBuild(filepath.Join(dir, out), pkg); err != nil {
			fmt.Fprintln(os.Stderr, "build test plugins:", err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	builtDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// pluginDir returns a fresh plugin_dir holding the test plugins, so a test
// may replace files in it without disturbing others.
func pluginDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{keywordBin, envBin} {
		src, dst := filepath.Join(builtDir, name), filepath.Join(dir, name)
		if err := os.Link(src, dst); err != nil {
			copyFile(t, src, dst)
		}
	}
	return dir
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// loadConfig writes cexec.hcl with a cexec block pointing at dir followed by
// body, loads it and fails the test on load errors.
func loadConfig(t testing.TB, dir, body string) (*config.Config, string) {
	t.Helper()
	src := fmt.Sprintf("cexec {\n  plugin_dir = %q\n  data_dir   = %q\n}\n\n%s", dir, t.TempDir(), body)
	path := filepath.Join(t.TempDir(), "cexec.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path, config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }})
	if diags.HasErrors() {
		t.Fatalf("load config: %s", diags.Error())
	}
	return cfg, src
}

// lineOf is the 1-based line of the first line of src containing s.
func lineOf(t *testing.T, src, s string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in config", s)
	return 0
}

// testLogger logs to the test's output and to the returned buffer.
func testLogger(t *testing.T) (hclog.Logger, *testutil.Buffer) {
	buf := &testutil.Buffer{}
	return hclog.New(&hclog.LoggerOptions{
		Name:   "cexecd",
		Level:  hclog.Debug,
		Output: io.MultiWriter(buf, tWriter{t}),
	}), buf
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startHost starts a host and stops it when the test ends.
func startHost(t *testing.T, cfg *config.Config, log hclog.Logger) (*Host, hcl.Diagnostics) {
	t.Helper()
	h := New(cfg, log)
	diags := h.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Stop(ctx)
	})
	return h, diags
}

func statusOf(t *testing.T, h *Host, kind pluginapi.Kind, name string) Status {
	t.Helper()
	for _, s := range h.Status() {
		if s.Kind == kind && s.Name == name {
			return s
		}
	}
	t.Fatalf("no status for %s.%s", kind, name)
	return Status{}
}
