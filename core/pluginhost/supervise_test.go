package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/selector"
)

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
			// plugins ls must still say what happened.
			for _, want := range []string{fmt.Sprintf("process %d exited", before.PID), "signal: killed"} {
				if !strings.Contains(s.LastError, want) {
					t.Errorf("last error after the restart %q, want it to say %q", s.LastError, want)
				}
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

// TestGuardCallsBoundedByTimeout: a guard that hangs (here stopped with
// SIGSTOP) fails a call that carries no deadline after the plugin's
// timeout, as cexec.hcl documents, instead of holding the caller (an MCP
// request, with the program's output waiting to be tokenized) forever.
func TestGuardCallsBoundedByTimeout(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, `
plugin "guard" "env" {
  command = "envplugin"
  timeout = "1s"
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
	pid := statusOf(t, h, pluginapi.KindGuard, "env").PID
	testutil.Stop(t, pid)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	calls := map[string]func(ctx context.Context) error{
		"Detect": func(ctx context.Context) error {
			_, err := g.Detect(ctx, guard.DetectRequest{Text: "x"})
			return err
		},
		"CheckCode": func(ctx context.Context) error {
			_, err := g.CheckCode(ctx, guard.CheckCodeRequest{Code: "1"})
			return err
		},
		"CheckToolCall": func(ctx context.Context) error {
			_, err := g.CheckToolCall(ctx, guard.CheckToolCallRequest{Server: "s", Tool: "t"})
			return err
		},
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() { done <- call(context.Background()) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s of a hung guard = %v, want a deadline error", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s of a hung guard still waits after 10s; its timeout is 1s", name)
		}
	}
}

// TestChildHoldingOutputDoesNotStallThePlugin: a plugin whose process
// leaves a child holding its stdout and stderr (a wrapper script, a helper
// server it spawned) is still restarted when it dies, and a start that
// times out still returns at its timeout. go-plugin notices an exit only
// once both pipes close.
func TestChildHoldingOutputDoesNotStallThePlugin(t *testing.T) {
	dir := pluginDir(t)
	// The helper sleeps in the background with the plugin's pipes; the
	// plugin itself then replaces the shell.
	wrapper := "#!/bin/sh\nsleep 300 &\nexec \"$(dirname \"$0\")/" + envBin + "\"\n"
	silent := "#!/bin/sh\nsleep 300\n"
	for name, body := range map[string]string{"wrapped": wrapper, "silent": silent} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("start timeout", func(t *testing.T) {
		cfg, _ := loadConfig(t, dir, "plugin \"selector\" \"silent\" {\n  command = \"silent\"\n  timeout = \"500ms\"\n}\n")
		// Without the fix the start waits for the child's 300 s sleep; a
		// minute tells that from a start that ends at its timeout, even on
		// a loaded machine.
		done := make(chan hcl.Diagnostics, 1)
		go func() { done <- Validate(context.Background(), cfg, hclog.NewNullLogger()) }()
		select {
		case diags := <-done:
			if !diags.HasErrors() {
				t.Fatal("no error")
			}
		case <-time.After(time.Minute):
			t.Fatal("a start with a 500ms timeout still waits after a minute, for the child holding its output")
		}
	})

	t.Run("restart", func(t *testing.T) {
		cfg, _ := loadConfig(t, dir, "plugin \"selector\" \"env\" {\n  command = \"wrapped\"\n}\n")
		log, _ := testLogger(t)
		h, diags := startHost(t, cfg, log)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		before := statusOf(t, h, pluginapi.KindSelector, "env")
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := statusOf(t, h, pluginapi.KindSelector, "env")
			if s.State == StateOK && s.Restarts == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("plugin not restarted within 10s: %+v", s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestSelectorCallsBoundedByTimeout: a selector that hangs fails a call
// that carries no deadline after the plugin's timeout, as cexec.hcl
// documents for every call, instead of holding search_tools forever.
func TestSelectorCallsBoundedByTimeout(t *testing.T) {
	dir := pluginDir(t)
	cfg, _ := loadConfig(t, dir, `
plugin "selector" "env" {
  command = "envplugin"
  timeout = "1s"
}
`)
	log, _ := testLogger(t)
	h, diags := startHost(t, cfg, log)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	sel, err := h.Selector("env")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// The test plugin answers the query "sleep" only when cancelled.
	go func() {
		_, err := sel.Search(context.Background(), selector.SearchRequest{Query: "sleep"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "within its timeout of 1s") {
			t.Errorf("Search of a hung selector = %v, want a deadline error naming the timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Search of a hung selector still waits after 10s; its timeout is 1s")
	}
}
