package runtime

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestForkServer: once warm, the zygote's programs are forked by its fork
// server, which reports how they ended (exit status, the signal that
// killed one); a program that kills the fork server costs nothing but the
// fork server: later programs are forked by the zygote itself, as before
// the warm-up, and end as they should.
func TestForkServer(t *testing.T) {
	r, _ := startZygote(t, Options{})
	hello, err := r.Ready(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parent := func() int { t.Helper(); return programParent(t, r) }
	server := waitForkServer(t, r, hello.PID)
	ends := func(who string) {
		t.Helper()
		for _, tc := range []struct {
			code      string
			exit      int
			errorType string
			message   string
		}{
			{"import os\nos._exit(3)", 3, "", ""},
			{"import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", 128 + 11, "Killed", "killed by SIGSEGV"},
			{"print(2)", 0, "", ""},
		} {
			res := exec1(t, r, tc.code, nil)
			if res.ExitCode != tc.exit {
				t.Errorf("%s: %q exited %d, want %d (%+v)", who, tc.code, res.ExitCode, tc.exit, res)
			}
			if tc.errorType != "" && (res.Error == nil || res.Error.Type != tc.errorType || !strings.Contains(res.Error.Message, tc.message)) {
				t.Errorf("%s: %q error %+v, want %s %q", who, tc.code, res.Error, tc.errorType, tc.message)
			}
		}
	}
	ends("forked by the fork server")

	res := exec1(t, r, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('done')", nil)
	if res.ExitCode != 0 {
		t.Fatalf("the program that killed the fork server: %+v", res)
	}
	for i := range 3 {
		if p := parent(); p != hello.PID {
			t.Fatalf("program %d after the fork server died has parent %d, want the zygote %d", i, p, hello.PID)
		}
	}
	ends("forked by the zygote")
	// The zygote reaped the fork server it dropped: a zygote run as a
	// plain process, as here, has no sweep that would.
	if slices.Contains(zombies(t, hello.PID), server) {
		t.Errorf("the fork server %d is still the zygote's zombie child", server)
	}
	if !r.Healthy() {
		t.Error("the runner is not healthy")
	}
}

// programParent is the parent process of a program the zygote runs.
func programParent(t *testing.T, r *Runner) int {
	t.Helper()
	h := &recHost{}
	if res := exec1(t, r, "import os\nprint(os.getppid())", h); res.ExitCode != 0 {
		t.Fatalf("getppid: %+v", res)
	}
	out, _ := h.out()
	ppid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("getppid printed %q", out)
	}
	return ppid
}

// waitForkServer waits until programs are no longer children of the
// zygote (zygote): the fork server starts with the first spare after the
// warm-up, in the zygote's idle time. It returns the fork server's pid.
func waitForkServer(t *testing.T, r *Runner, zygote int) int {
	t.Helper()
	server := programParent(t, r)
	for deadline := time.Now().Add(20 * time.Second); server == zygote; server = programParent(t, r) {
		if time.Now().After(deadline) {
			t.Fatal("every program is still the zygote's child after 20 s: no fork server")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return server
}

// TestOrphanedByForkServer: a program that kills its fork server becomes
// another process's child when the zygote is not the pid namespace's init
// (here a plain process; in a k8s pod the container's pid 1), so the zygote
// cannot read its exit status. Its end still counts only once it closed its
// output and channel, what it reported stands, and one that reported
// nothing is not taken for a success.
func TestOrphanedByForkServer(t *testing.T) {
	const kill = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(0.3)\nprint('after')\n"
	for _, tc := range []struct {
		name, code string
		exit       int
		errorType  string
		message    string
	}{
		{name: "reports its exit", code: kill + "raise SystemExit(3)", exit: 3},
		{name: "reports nothing", code: kill + "import sys\nsys.stdout.flush()\nos._exit(3)", exit: 1, errorType: "RunnerError", message: "its exit status is lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := startZygote(t, Options{})
			hello, err := r.Ready(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			waitForkServer(t, r, hello.PID)
			h := &recHost{}
			res := exec1(t, r, tc.code, h)
			if out, _ := h.out(); out != "after\n" {
				t.Errorf("stdout %q: the execution ended before the program", out)
			}
			if res.ExitCode != tc.exit {
				t.Errorf("exit %d, want %d (%+v)", res.ExitCode, tc.exit, res)
			}
			if tc.errorType == "" && res.Error != nil || tc.errorType != "" && (res.Error == nil || res.Error.Type != tc.errorType || !strings.Contains(res.Error.Message, tc.message)) {
				t.Errorf("error %+v, want %q %q", res.Error, tc.errorType, tc.message)
			}
		})
	}
}

// zombies lists pid's children that have exited but were not reaped.
func zombies(t *testing.T, pid int) []int {
	t.Helper()
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, k := range strings.Fields(string(kids)) {
		stat, err := os.ReadFile("/proc/" + k + "/stat")
		if err != nil {
			continue
		}
		// The state follows the command name in parentheses.
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			n, _ := strconv.Atoi(k)
			out = append(out, n)
		}
	}
	return out
}
