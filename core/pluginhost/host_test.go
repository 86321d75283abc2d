package pluginhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/selector"
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
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/cexec/cexec/examples/"+keywordBin, "./testdata/envplugin")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build test plugins:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
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

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testLogger logs to the test's output and to the returned buffer.
func testLogger(t *testing.T) (hclog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
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
		client, err := newClient(p, filepath.Join(dir, keywordBin), 10*time.Second, hclog.NewNullLogger(), nil)
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

// TestRestartAfterSIGKILL kills a plugin in the middle of a call.
func TestRestartAfterSIGKILL(t *testing.T) {
	dir := pluginDir(t)
	mark := filepath.Join(t.TempDir(), "sleeping")
	cfg, _ := loadConfig(t, dir, fmt.Sprintf(`
plugin "selector" "env" {
  command = "envplugin"
  env     = { ENVPLUGIN_SLEEP_MARK = %q }
}
`, mark))
	log, _ := testLogger(t)
	h, diags := startHost(t, cfg, log)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var hooked []string
	var hookMu sync.Mutex
	h.OnRestart(func(kind pluginapi.Kind, name string) {
		hookMu.Lock()
		defer hookMu.Unlock()
		hooked = append(hooked, string(kind)+"."+name)
	})
	sel, err := h.Selector("env")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	callErr := make(chan error, 1)
	go func() {
		_, err := sel.Search(ctx, selector.SearchRequest{Query: "sleep"})
		callErr <- err
	}()
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		select {
		case err := <-callErr:
			t.Fatalf("sleep call returned before the kill: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}

	before := statusOf(t, h, pluginapi.KindSelector, "env")
	killed := time.Now()
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	err = <-callErr
	failedAfter := time.Since(killed)
	if !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Errorf("in-flight call error %v does not wrap ErrPluginShutdown", err)
	}
	if want := "plugin selector.env exited during the call (it is being restarted)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("in-flight call error %q, want it to say %q", err, want)
	}

	var sawRestarting bool
	var back time.Duration
	for {
		s := statusOf(t, h, pluginapi.KindSelector, "env")
		if s.State == StateRestarting {
			sawRestarting = true
		}
		if s.State == StateOK && s.Restarts == 1 {
			back = time.Since(killed)
			if s.PID == before.PID || s.PID <= 0 {
				t.Errorf("restarted plugin has pid %d (before %d)", s.PID, before.PID)
			}
			break
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("plugin not back within 10s: %+v", s)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if !sawRestarting {
		t.Error("status never showed restarting")
	}
	t.Logf("SIGKILLed plugin: in-flight call failed after %s, plugin back (state ok, restarts 1) after %s", failedAfter, back)

	resp, err := sel.Search(ctx, selector.SearchRequest{Query: "env"})
	if err != nil || len(resp.Hits) == 0 {
		t.Fatalf("call after restart: %v (%d hits)", err, len(resp.Hits))
	}
	hookMu.Lock()
	defer hookMu.Unlock()
	if !slices.Equal(hooked, []string{"selector.env"}) {
		t.Errorf("OnRestart hook saw %v, want [selector.env]", hooked)
	}
}

// TestUnimplementedHookNotAskedAgain: once a guard process answers CheckCode
// with ErrUnimplemented, the host answers for it until the process restarts.
func TestUnimplementedHookNotAskedAgain(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, `
plugin "guard" "env" {
  command = "envplugin"
  env     = { ENVPLUGIN_SERVE = "guard", ENVPLUGIN_KIND = "guard" }
}
`)
	log, _ := testLogger(t)
	h, diags := startHost(t, cfg, log)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g, err := h.Guard("env")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := func() string {
		t.Helper()
		spans, err := g.Detect(ctx, guard.DetectRequest{Text: "x"})
		if err != nil || len(spans) != 1 {
			t.Fatalf("Detect = %v, %v", spans, err)
		}
		return spans[0].Type
	}
	for range 3 {
		if _, err := g.CheckCode(ctx, guard.CheckCodeRequest{Code: "1"}); !errors.Is(err, pluginapi.ErrUnimplemented) {
			t.Fatalf("CheckCode = %v, want ErrUnimplemented", err)
		}
	}
	if got := calls(); got != "checkcode-calls=1" {
		t.Errorf("after 3 CheckCode calls the plugin saw %s, want 1", got)
	}
	pid := statusOf(t, h, pluginapi.KindGuard, "env").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for s := statusOf(t, h, pluginapi.KindGuard, "env"); s.State != StateOK || s.PID == pid; s = statusOf(t, h, pluginapi.KindGuard, "env") {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := g.CheckCode(ctx, guard.CheckCodeRequest{Code: "1"}); !errors.Is(err, pluginapi.ErrUnimplemented) {
		t.Fatalf("CheckCode after restart = %v, want ErrUnimplemented", err)
	}
	if got := calls(); got != "checkcode-calls=1" {
		t.Errorf("the restarted plugin saw %s, want 1 (asked again once)", got)
	}
}

// TestCallWaitsForRestart: a call made while the plugin restarts waits for
// it instead of failing.
func TestCallWaitsForRestart(t *testing.T) {
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
	pid := statusOf(t, h, pluginapi.KindSelector, "env").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Wait until the supervisor noticed, so the call below meets the
	// restart rather than the dead process.
	for statusOf(t, h, pluginapi.KindSelector, "env").State != StateRestarting {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sel.Search(ctx, selector.SearchRequest{Query: "env"}); err != nil {
		t.Fatalf("call during restart: %v", err)
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

// TestBinaryMissingAtLoad: a binary config.Load already reported missing is
// not reported twice by Validate; Start still refuses to run without it when
// it is required.
func TestBinaryMissingAtLoad(t *testing.T) {
	for _, required := range []bool{false, true} {
		t.Run(fmt.Sprintf("required=%v", required), func(t *testing.T) {
			src := fmt.Sprintf("cexec {\n  plugin_dir = %q\n  data_dir   = %q\n}\n\nplugin \"guard\" \"gone\" {\n  required = %v\n}\n", pluginDir(t), t.TempDir(), required)
			path := filepath.Join(t.TempDir(), "cexec.hcl")
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, loadDiags := config.Load(path, config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }})
			if cfg == nil || len(loadDiags) != 1 {
				t.Fatalf("load: want one diagnostic about the missing binary, got %v", loadDiags)
			}
			if diags := Validate(context.Background(), cfg, hclog.NewNullLogger()); len(diags) != 0 {
				t.Errorf("Validate repeated Load's diagnostic: %v", diags)
			}
			h, diags := startHost(t, cfg, hclog.NewNullLogger())
			if diags.HasErrors() != required {
				t.Errorf("Start diagnostics %v; want errors = %v", diags, required)
			}
			if s := statusOf(t, h, pluginapi.KindGuard, "gone"); s.State != StateFailed || !strings.Contains(s.LastError, "not found") {
				t.Errorf("status %+v, want failed with the reason", s)
			}
		})
	}
}

// waitState polls the plugin's status until cond holds, failing after 10 s.
func waitState(t *testing.T, h *Host, kind pluginapi.Kind, name string, what string, cond func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := statusOf(t, h, kind, name)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin never became %s: %+v", what, s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestRestartRetriesFailedLaunches: while relaunching fails the plugin stays
// restarting and says why; once the binary works again it comes back.
func TestRestartRetriesFailedLaunches(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, "plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n}\n")
	h, diags := startHost(t, cfg, hclog.NewNullLogger())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	env := filepath.Join(dir, envBin)
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, []byte("#!/bin/sh\necho 'cannot start today' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pid := statusOf(t, h, pluginapi.KindSelector, "env").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s := waitState(t, h, pluginapi.KindSelector, "env", "restarting with the launch error", func(s Status) bool {
		return s.State == StateRestarting && strings.Contains(s.LastError, "cannot start today")
	})
	if s.Restarts != 0 || s.PID != 0 {
		t.Errorf("failing relaunch counted as a restart: %+v", s)
	}
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(builtDir, envBin), env)
	s = waitState(t, h, pluginapi.KindSelector, "env", "ok again", func(s Status) bool { return s.State == StateOK })
	if s.Restarts != 1 || s.LastError != "" {
		t.Errorf("after recovery: %+v, want 1 restart and no error", s)
	}
}

// TestStopDuringRestart: Stop while a relaunch waits out its backoff ends
// supervision; nothing is launched afterwards.
func TestStopDuringRestart(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, "plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n}\n")
	h := New(cfg, hclog.NewNullLogger())
	if diags := h.Start(context.Background()); diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	sel, err := h.Selector("env")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(statusOf(t, h, pluginapi.KindSelector, "env").PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitState(t, h, pluginapi.KindSelector, "env", "restarting", func(s Status) bool { return s.State == StateRestarting })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Stop(ctx)
	time.Sleep(3 * backoffMin)
	if s := statusOf(t, h, pluginapi.KindSelector, "env"); s.State != StateDisabled || s.PID != 0 {
		t.Errorf("after Stop: %+v, want disabled without a process", s)
	}
	if _, err := sel.Search(ctx, selector.SearchRequest{Query: "env"}); !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Errorf("call after Stop = %v, want ErrPluginShutdown", err)
	}
}
