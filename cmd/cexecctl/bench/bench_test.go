package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/client"
)

func TestSummarise(t *testing.T) {
	runs := func(xs ...float64) []Run {
		out := make([]Run, len(xs))
		for i, x := range xs {
			out[i] = Run{ReadyMs: x}
		}
		return out
	}
	tests := []struct {
		name string
		runs []Run
		want Stats
	}{
		{"one", runs(5), Stats{P50: 5, P90: 5, Min: 5, Max: 5}},
		{"ten unsorted", runs(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), Stats{P50: 5, P90: 9, Min: 1, Max: 10}},
		{"four", runs(4, 1, 3, 2), Stats{P50: 2, P90: 4, Min: 1, Max: 4}},
	}
	for _, tt := range tests {
		if got := summarise(tt.runs, func(r Run) float64 { return r.ReadyMs }); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestVMRSS(t *testing.T) {
	rss, err := vmRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A Go test binary is resident with at least a MiB and far less than
	// a GiB; a parsing slip (kB as MiB, bytes) lands outside.
	if rss < 1 || rss > 1024 {
		t.Errorf("VmRSS = %.1f MiB", rss)
	}
	if _, err := vmRSS(1 << 30); err == nil {
		t.Error("no error for a pid that does not exist")
	}
}

func TestCPUMs(t *testing.T) {
	// Burn CPU so the figure is above the 10 ms tick.
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	ms, err := cpuMs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if ms < 10 || ms > 60_000 {
		t.Errorf("cpu = %.0f ms after a 50 ms busy loop", ms)
	}
}

// TestMachineBusyMs burns CPU in this process and checks the machine's
// busy time grew by at least part of it (/proc/stat shows idle time in
// 10 ms units per CPU) and by no more than every CPU's wall-clock time.
func TestMachineBusyMs(t *testing.T) {
	start := time.Now()
	before, err := machineBusyMs()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	after, err := machineBusyMs()
	if err != nil {
		t.Fatal(err)
	}
	most := float64(time.Since(start).Milliseconds()+10) * float64(runtime.NumCPU())
	if busy := after - before; busy < 30 || busy > most {
		t.Errorf("machine busy %.0f ms during a 100 ms busy loop, want 30 to %.0f", busy, most)
	}
}

// TestQuiesce runs quiesce on a process whose child sleeps and on one whose
// child spins: the first falls quiet (well before a generous limit), the
// second never does, so quiesce gives up at its short limit. Only the
// outcome is checked, never the time taken: that depends on the machine.
func TestQuiesce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child string
		limit time.Duration
		quiet bool
	}{
		{"sleeping child", "sleep 60", time.Minute, true},
		{"spinning child", "while :; do :; done", 500 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The tree is a shell that waits for a sleeping child or spins.
			cmd := exec.Command("/bin/sh", "-c", tc.child+"; true")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = exec.Command("pkill", "-KILL", "-P", strconv.Itoa(cmd.Process.Pid)).Run()
				_ = cmd.Wait()
			})
			if !tc.quiet {
				spinning(t, cmd.Process.Pid)
			}
			_, quiet, err := quiesce(t.Context(), cmd.Process.Pid, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if quiet != tc.quiet {
				t.Errorf("quiet = %v, want %v", quiet, tc.quiet)
			}
		})
	}
}

func TestQuiesceWithoutDaemon(t *testing.T) {
	if waited, quiet, err := quiesce(t.Context(), 0, time.Minute); waited != 0 || !quiet || err != nil {
		t.Errorf("quiesce without a pid = %v, %v, %v; want 0, true, nil", waited, quiet, err)
	}
}

// spinning waits until the tree of root has used CPU, so that a shell still
// starting on a busy machine is not taken for a quiet one.
func spinning(t *testing.T, root int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if cpu, ok := treeCPUMs(root); ok && cpu >= 20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the spinning shell used no CPU in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPrivateDaemonExitsAtStart: a cexecd that exits before its socket is
// ready (a config it refuses, say) is an error that carries its stderr,
// not a hang.
func TestPrivateDaemonExitsAtStart(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cexecd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'cexec.hcl:8: plugin escapes plugin_dir' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := withPrivateDaemon(ctx, toolsFlags{cexecd: bin, timeout: 30 * time.Second}, "mcp-server-memory", func(*client.Client) error {
		t.Error("ran the benchmark on a daemon that exited")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "exited before its socket was ready") || !strings.Contains(err.Error(), "plugin escapes plugin_dir") {
		t.Errorf("error %v, want the exit and the daemon's stderr", err)
	}
	if ctx.Err() != nil {
		t.Error("withPrivateDaemon hung")
	}
}
