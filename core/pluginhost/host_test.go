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

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

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
	// The failed relaunches are over; what stays is how the process ended.
	if s.Restarts != 1 || !strings.HasSuffix(s.LastError, "; restarted") || strings.Contains(s.LastError, "cannot start today") {
		t.Errorf("after recovery: %+v, want 1 restart and the exit that caused it", s)
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
