package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestForker runs programs with pauses between them, as an agent sends
// them, so that each runs in a spare the forker made (cexec/_forker.py):
// the program's parent is the forker, not the zygote. Programs that attack
// the forker (stop it, kill it) and ones that end badly must not disturb
// the executions after them.
func TestForker(t *testing.T) {
	r, _ := startZygote(t, Options{})
	hello, err := r.Ready(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// parent prints the program's parent and that one's, so that a test
	// can tell who forked it.
	const parent = "import os\nppid = os.getppid()\nwith open(f'/proc/{ppid}/stat') as f:\n    print(ppid, f.read().rsplit(')', 1)[1].split()[1])\n"
	fromForker := func(t *testing.T) bool {
		t.Helper()
		h := &recHost{}
		res := exec1(t, r, parent, h)
		out, errOut := h.out()
		f := strings.Fields(out)
		if res.ExitCode != 0 || len(f) != 2 {
			t.Fatalf("parent program: exit %d, stdout %q, stderr %q", res.ExitCode, out, errOut)
		}
		ppid, _ := strconv.Atoi(f[0])
		grand, _ := strconv.Atoi(f[1])
		return ppid != hello.PID && grand == hello.PID
	}
	pause := func() { time.Sleep(100 * time.Millisecond) } // warm-up, then a spare

	cases := []struct {
		name  string
		code  string
		check func(t *testing.T, exit int, errType, stdout string)
	}{
		{"prints", "print(6*7)", func(t *testing.T, exit int, errType, stdout string) {
			if exit != 0 || stdout != "42\n" {
				t.Errorf("exit %d, stdout %q", exit, stdout)
			}
		}},
		{"exits without a word", "import os\nos._exit(3)", func(t *testing.T, exit int, errType, stdout string) {
			if exit != 3 {
				t.Errorf("exit %d, want 3", exit)
			}
		}},
		{"kills itself", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", func(t *testing.T, exit int, errType, stdout string) {
			if exit != 137 || errType != "Killed" {
				t.Errorf("exit %d, error %q; want 137 (SIGKILL), Killed", exit, errType)
			}
		}},
		{"stops the forker", "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nprint('stopped')", func(t *testing.T, exit int, errType, stdout string) {
			if exit != 0 || stdout != "stopped\n" {
				t.Errorf("exit %d, stdout %q", exit, stdout)
			}
		}},
		{"kills the forker", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('killed')", func(t *testing.T, exit int, errType, stdout string) {
			if exit != 0 || stdout != "killed\n" {
				t.Errorf("exit %d, stdout %q", exit, stdout)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A forker killed by the case before is replaced after an
			// execution: the first program may run in the zygote's own fork.
			for range 3 {
				pause()
				if fromForker(t) {
					break
				}
			}
			pause()
			if !fromForker(t) {
				t.Fatal("the program before the case did not run in a spare the forker made")
			}
			pause()
			h := &recHost{}
			res := exec1(t, r, c.code, h)
			out, _ := h.out()
			errType := ""
			if res.Error != nil {
				errType = res.Error.Type
			}
			c.check(t, res.ExitCode, errType, out)
			// Whatever the program did, the next ones run.
			for i := range 3 {
				if i > 0 {
					pause()
				}
				h := &recHost{}
				res := exec1(t, r, fmt.Sprintf("print(%d)", i), h)
				if out, _ := h.out(); res.ExitCode != 0 || out != fmt.Sprintf("%d\n", i) {
					t.Fatalf("execution %d after the case: exit %d, stdout %q, error %+v", i, res.ExitCode, out, res.Error)
				}
			}
		})
	}
}
