package bwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/plugins/sandbox-bwrap/internal/bwrapproc"
)

// stallingBwrap writes a wrapper around the real bwrap for the plugin's
// bwrap setting. Sandbox launches run bwrap with marker as argv[0] and an
// --info-fd that is a full pipe, so that bwrap blocks right after cloning
// the sandbox's first process, before it lets that process go on: the
// window in which killing bwrap orphans its child (see killBwrap). The
// plugin's own info pipe stays open, so the plugin keeps waiting.
func stallingBwrap(t *testing.T, marker string) string {
	t.Helper()
	real, err := exec.LookPath("bwrap")
	if err != nil {
		testutil.SkipMissing(t, "no bwrap")
	}
	// The interpreter sandboxes use: one that run_as can run.
	s, _ := New(nil).settings(context.Background())
	python := s.python
	if python == "" {
		testutil.SkipMissing(t, "no python")
	}
	// Readable by run_as, which bwrap runs as when the test is root.
	dir, err := os.MkdirTemp("", "cexec-bwrap-leaktest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!%s -I
import fcntl, os, sys
args = sys.argv[1:]
if "--info-fd" in args:
    info = int(args[args.index("--info-fd") + 1])
    os.set_inheritable(os.dup(info), True)
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    os.set_inheritable(r, True)  # a reader stays: bwrap blocks, no EPIPE
    os.dup2(w, info)
os.execv(%q, [%q] + args)
`, python, real, marker)
	path := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// markerProcs lists the live (not zombie) processes whose argv[0] is
// marker, as "pid ppid state wchan".
func markerProcs(marker string) []string {
	return markerProcsWith(marker, "")
}

// markerProcsWith is markerProcs limited to processes that have arg among
// their arguments.
func markerProcsWith(marker, arg string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := bytes.Split(cmdline, []byte{0})
		if string(args[0]) != marker || arg != "" && !slices.ContainsFunc(args, func(a []byte) bool { return string(a) == arg }) {
			continue
		}
		state, ppid := bwrapproc.Stat(pid)
		if state == 0 || state == 'Z' || state == 'X' {
			continue
		}
		wchan, _ := os.ReadFile("/proc/" + e.Name() + "/wchan")
		out = append(out, fmt.Sprintf("pid %d ppid %d state %c wchan %s", pid, ppid, state, wchan))
	}
	return out
}

// waitProcs waits until cond holds for marker's processes (those with arg
// among their arguments, unless arg is empty) and returns them.
func waitProcs(t *testing.T, marker, arg string, timeout time.Duration, cond func(n int) bool) ([]string, bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		procs := markerProcsWith(marker, arg)
		if cond(len(procs)) {
			return procs, true
		}
		if time.Now().After(deadline) {
			return procs, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killMarkerProcs kills what a failed test left behind.
func killMarkerProcs(marker string) {
	for _, p := range markerProcs(marker) {
		if pid, err := strconv.Atoi(strings.Fields(p)[1]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func configuredPlugin(t *testing.T, bwrapPath string) *Plugin {
	t.Helper()
	p := New(nil)
	cfg, _ := json.Marshal(map[string]string{"bwrap": bwrapPath})
	diags, err := p.Configure(context.Background(), cfg, sandbox.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}
	return p
}

// TestNoOrphanWhenSetupIsInterrupted checks that no process of a sandbox
// survives when its creation is abandoned while bwrap is setting it up:
// not bwrap, and not the sandbox's first process, which bwrap has cloned
// but not yet let go on (it waits in eventfd_read, without a parent death
// signal yet).
func TestNoOrphanWhenSetupIsInterrupted(t *testing.T) {
	if os.Getenv(leakHelperEnv) != "" {
		t.Skip("helper process")
	}
	tests := []struct {
		name string
		// wait is how many of bwrap's processes must exist before the
		// interruption: 2 is bwrap and the child it cloned, both blocked
		// (bwrap writing --info-fd, the child reading the eventfd).
		wait int
		// killPlugin interrupts by killing the plugin process rather than
		// by cancelling Create.
		killPlugin bool
	}{
		{name: "cancel once bwrap cloned", wait: 2},
		{name: "plugin killed once bwrap cloned", wait: 2, killPlugin: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			marker := fmt.Sprintf("bwrap-leaktest-%d-%d", os.Getpid(), i)
			t.Cleanup(func() { killMarkerProcs(marker) })
			wrapper := stallingBwrap(t, marker)
			p := configuredPlugin(t, wrapper)
			defer p.Close()
			if caps, _ := p.Capabilities(context.Background()); !caps.Available {
				testutil.SkipMissing(t, "%s", caps.UnavailableReason)
			}

			var interrupt func()
			if tc.killPlugin {
				cmd := exec.Command(os.Args[0], "-test.run=^TestLeakHelper$", "-test.v")
				cmd.Env = append(os.Environ(), leakHelperEnv+"="+wrapper)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
				interrupt = func() {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					// The next plugin process cleans up after it.
					p2 := configuredPlugin(t, wrapper)
					defer p2.Close()
					s, _ := p2.settings(context.Background())
					if _, err := p2.libDir(context.Background(), s); err != nil {
						t.Error(err)
					}
				}
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					_, err := p.Create(ctx, sandbox.CreateRequest{ID: "leak"})
					errc <- err
				}()
				interrupt = func() {
					cancel()
					select {
					case err := <-errc:
						if err == nil {
							t.Error("create succeeded")
						}
					case <-time.After(5 * time.Second):
						t.Error("create did not return after its context was cancelled")
					}
				}
			}

			// The sandbox's launch, not the availability probe before it.
			procs, ok := waitProcs(t, marker, "--info-fd", 20*time.Second, func(n int) bool { return n >= tc.wait })
			if !ok {
				t.Fatalf("bwrap did not get to %d processes: %q", tc.wait, procs)
			}
			t.Logf("interrupting with %q", procs)
			interrupt()
			if procs, ok := waitProcs(t, marker, "", 15*time.Second, func(n int) bool { return n == 0 }); !ok {
				t.Errorf("processes left behind: %q", procs)
			}
		})
	}
}

const leakHelperEnv = "CEXEC_BWRAP_LEAK_HELPER"

// TestLeakHelper is the plugin process TestNoOrphanWhenSetupIsInterrupted
// kills: it creates a sandbox with the stalling bwrap and waits.
func TestLeakHelper(t *testing.T) {
	wrapper := os.Getenv(leakHelperEnv)
	if wrapper == "" {
		t.Skip("only run by TestNoOrphanWhenSetupIsInterrupted")
	}
	p := configuredPlugin(t, wrapper)
	_, err := p.Create(context.Background(), sandbox.CreateRequest{ID: "leak"})
	t.Fatalf("create returned: %v", err)
}
