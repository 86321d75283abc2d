package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIdleZygotesKilled: the zygotes of the pool's idle sandboxes are
// killed from outside, as the kernel's OOM killer or an operator might. A
// second later (past the pool's health-check window) the next execution
// runs in a live sandbox: the daemon, whose runner drives each zygote over
// its socket, knows the dead ones from their closed connections, and the
// pool replaces them.
func TestIdleZygotesKilled(t *testing.T) {
	s := newSetup(t)
	appendConfig(t, s, "\nsandbox {\n  pool {\n    warm      = 2\n    max_total = 4\n  }\n}\n")
	d := startDaemon(t, s)
	sandboxOrSkip(t, s)
	first, _ := sbxJSON(t, s, "-c", "print(1)")
	if first.ExitCode != 0 {
		t.Fatalf("first execution: %+v", first)
	}
	// Killed while the pool still warmed one, the new sandbox, proven
	// alive by its creation, would take the next execution unchecked.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var st struct {
			Creating int            `json:"creating"`
			Idle     map[string]int `json:"idle"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "pool", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Creating == 0 && st.Idle["default"] >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not settle at 2 idle sandboxes: %+v", st)
		}
	}
	zygotes := zygotesOf(t, d.cmd.Process.Pid)
	if len(zygotes) == 0 {
		t.Fatal("found no zygote under cexecd")
	}
	for _, pid := range zygotes {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("killed %d zygotes", len(zygotes))
	time.Sleep(1500 * time.Millisecond)
	next, _ := sbxJSON(t, s, "-c", "print(2)")
	if next.ExitCode != 0 || next.Stdout != "2\n" || next.SandboxID == first.SandboxID {
		t.Fatalf("after %d zygotes were killed: %+v (the first ran in %s)", len(zygotes), next, first.SandboxID)
	}
	if !strings.Contains(d.stderr.String(), "idle sandbox failed its health check; replacing it") {
		t.Errorf("cexecd did not say it replaced a dead sandbox:\n%s", d.stderr)
	}
}

// zygotesOf returns the sandbox zygotes below root: the processes bwrap
// started.
func zygotesOf(t *testing.T, root int) []int {
	t.Helper()
	type proc struct {
		ppid int
		comm string
	}
	procs := map[int]proc{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		open, end := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[end+1:]))
		if open < 0 || len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		procs[pid] = proc{ppid: ppid, comm: string(stat[open+1 : end])}
	}
	below := func(pid int) bool {
		for pid > 1 {
			if pid = procs[pid].ppid; pid == root {
				return true
			}
		}
		return false
	}
	var out []int
	for pid, p := range procs {
		if p.comm != "bwrap" && procs[p.ppid].comm == "bwrap" && below(pid) {
			out = append(out, pid)
		}
	}
	return out
}
