package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestUnavailable(t *testing.T) {
	tests := []struct {
		name, config, reason string
	}{
		{"no bwrap", `{"bwrap": "/nonexistent/bwrap"}`, "bubblewrap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(nil)
			defer p.Close()
			diags, err := p.Configure(context.Background(), json.RawMessage(tc.config), sandbox.APIVersion)
			if err != nil || diags.HasErrors() {
				t.Fatalf("configure: %v %v", diags, err)
			}
			caps, err := p.Capabilities(context.Background())
			if err != nil || caps.Available || !strings.Contains(caps.UnavailableReason, tc.reason) {
				t.Errorf("capabilities %+v %v", caps, err)
			}
			if _, err := p.Create(context.Background(), sandbox.CreateRequest{ID: "x"}); !errors.Is(err, pluginapi.ErrUnavailable) {
				t.Errorf("create: %v", err)
			}
		})
	}
}

// TestLifecycle checks that Destroy and Close leave nothing behind: no
// processes, no cgroups, no runtime or staging directories.
func TestLifecycle(t *testing.T) {
	p := New(nil)
	caps, _ := p.Capabilities(context.Background())
	if !caps.Available {
		testutil.SkipMissing(t, "%s", caps.UnavailableReason)
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if _, err := p.Create(ctx, sandbox.CreateRequest{ID: id, Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := p.boxes.Get("a")
	b, _ := p.boxes.Get("b")
	res, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: "a", Code: "import subprocess\nsubprocess.Popen(['sleep', '60'])"}, &plugintest.Host{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if err := p.Health(ctx, "a"); err != nil {
		t.Fatalf("health: %v", err)
	}
	cgDirs := func(bx *box) []string {
		if bx.cg == nil {
			return nil
		}
		return bx.cg.dirs
	}
	if err := p.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(ctx, "a"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("second destroy: %v", err)
	}
	gone := func(what string, pid int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s (pid %d) still running", what, pid)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	gone("zygote of a", a.zygotePID)
	for _, d := range cgDirs(a) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind", d)
		}
	}
	lib, stage, interp := p.lib, p.stage, p.interpDir
	if interp == "" {
		t.Error("no execute-only interpreter was made")
	}
	var parents []string
	if p.cgfs != nil {
		for _, d := range p.cgfs.parent {
			parents = append(parents, d)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	gone("zygote of b", b.zygotePID)
	for _, d := range append(append(cgDirs(b), parents...), lib, stage, interp) {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind", d)
		}
	}
	if _, err := p.Create(ctx, sandbox.CreateRequest{ID: "c"}); !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Errorf("create after close: %v", err)
	}
}

// TestZygoteDies checks a sandbox whose zygote was killed from outside (as
// the OOM killer might): the backend reports it and keeps serving.
func TestZygoteDies(t *testing.T) {
	p := New(nil)
	defer p.Close()
	caps, _ := p.Capabilities(context.Background())
	if !caps.Available {
		testutil.SkipMissing(t, "%s", caps.UnavailableReason)
	}
	ctx := context.Background()
	if _, err := p.Create(ctx, sandbox.CreateRequest{ID: "victim"}); err != nil {
		t.Fatal(err)
	}
	bx, _ := p.boxes.Get("victim")
	if err := syscall.Kill(bx.zygotePID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-bx.exited
	if err := p.Health(ctx, "victim"); err == nil {
		t.Error("health of a dead sandbox passed")
	}
	if _, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: "victim", Code: "print(1)"}, &plugintest.Host{}); !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Errorf("exec in a dead sandbox: %v", err)
	}
	list, _ := p.List(ctx)
	if len(list) != 1 || list[0].State != "exited" {
		t.Errorf("list %+v", list)
	}
	if err := p.Destroy(ctx, "victim"); err != nil {
		t.Errorf("destroy: %v", err)
	}
	if _, err := p.Create(ctx, sandbox.CreateRequest{ID: "next"}); err != nil {
		t.Fatal(err)
	}
	h := &plugintest.Host{}
	if res, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: "next", Code: "print(3)"}, h); err != nil || h.Stdout() != "3\n" {
		t.Errorf("next sandbox: %+v %v %q", res, err, h.Stdout())
	}
}

func TestRemoveStaleTemp(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	// A pid that cannot exist (above pid_max), one that does (ours, the
	// current process being skipped) and one of a live process (pid 1).
	dead := filepath.Join(os.TempDir(), "cexec-bwrap-runtime-999999999-abc")
	ours := filepath.Join(os.TempDir(), "cexec-bwrap-runtime-"+strconv.Itoa(os.Getpid())+"-abc")
	live := filepath.Join(os.TempDir(), "cexec-bwrap-runtime-1-abc")
	other := filepath.Join(os.TempDir(), "something-else-999999999-abc")
	for _, d := range []string{dead, ours, live, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleTemp("cexec-bwrap-runtime-")
	for d, want := range map[string]bool{dead: false, ours: true, live: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", d, err == nil, want)
		}
	}
}
