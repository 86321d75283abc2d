package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestFreshGlobals runs one session's executions in its reused interpreter
// with fresh globals (ExecRequest.FreshGlobals): each starts as a forked
// child would (no globals, the working directory, environment, builtins
// and signal handlers as before, modules from the workspace imported
// again), but in the same process, with the standard library's modules
// still loaded; and a program that leaves what cannot be put back (a
// thread, an open file) retires the interpreter, so that the next one
// starts in a new process.
func TestFreshGlobals(t *testing.T) {
	r, ws := startZygote(t, Options{})
	ctx := context.Background()
	run := func(t *testing.T, code string) (string, sandbox.ExecResult) {
		t.Helper()
		h := &recHost{}
		res, err := r.Exec(ctx, sandbox.ExecRequest{Code: code, Persistent: true, FreshGlobals: true, Session: "s", Timeout: 20 * time.Second}, h)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := h.out()
		return out, res
	}
	pid := func(t *testing.T) string {
		t.Helper()
		out, res := run(t, "import os\nprint(os.getpid())")
		if res.ExitCode != 0 {
			t.Fatalf("getpid: %+v", res)
		}
		return strings.TrimSpace(out)
	}
	first := pid(t)
	for _, tc := range []struct {
		name, setup, check, want string
		exit                     int
		// retire: the setup's interpreter must not serve the check.
		retire bool
	}{
		{name: "globals", setup: "x = 1", check: "print('x' in globals(), __name__)", want: "False __main__\n"},
		{name: "working directory", setup: "import os\nos.chdir('/')", check: "import os\nprint(os.getcwd() == " + pyStr(ws) + ")", want: "True\n"},
		{name: "environment", setup: "import os\nos.environ['CEXEC_T'] = '1'", check: "import os\nprint('CEXEC_T' in os.environ)", want: "False\n"},
		{name: "builtins", setup: "import builtins\nbuiltins.leak = 1\nbuiltins.print = None", check: "import builtins\nprint(hasattr(builtins, 'leak'))", want: "False\n"},
		{name: "signal handler", setup: "import signal\nsignal.signal(signal.SIGTERM, lambda *a: None)", check: "import signal\nprint(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)", want: "True\n"},
		{name: "sys.path and argv", setup: "import sys\nsys.path.insert(0, '/nowhere')\nsys.argv.append('x')", check: "import sys\nprint('/nowhere' in sys.path, sys.argv)", want: "False ['-c']\n"},
		{name: "workspace module imported again", setup: "open('helper.py', 'w').write('V = 1\\n')\nimport helper\nassert helper.V == 1\nopen('helper.py', 'w').write('V = 2\\n')", check: "import helper\nprint(helper.V)", want: "2\n"},
		{name: "standard library stays loaded", setup: "import json\njson._cexec_mark = 1", check: "import sys\nprint(hasattr(sys.modules.get('json'), '_cexec_mark'))", want: "True\n"},
		{name: "exit code", setup: "x = 1", check: "import sys\nsys.exit(3)", exit: 3},
		{name: "atexit runs once per execution", setup: "import atexit\natexit.register(print, 'bye')", check: "print('next')", want: "next\n"},
		{name: "file in a global is closed", setup: "f = open('/dev/null')\ndef use(): return f", check: "print(1)", want: "1\n"},
		{name: "file held by a class is collected", setup: "class Holder:\n    pass\nHolder.f = open('/dev/null')", check: "print(1)", want: "1\n"},
		{name: "memory kept past 64 MiB", setup: "import sys\nsys.modules['blob'] = bytearray(80 << 20)", check: "print(1)", want: "1\n", retire: true},
		{name: "stdout replaced", setup: "import io, sys\nsys.stdout = io.StringIO()", check: "print('seen')", want: "seen\n"},
		{name: "an alarm set", setup: "import signal\nsignal.alarm(1)", check: "import time\ntime.sleep(1.5)\nprint('alive')", want: "alive\n"},
		{name: "interpreter settings", setup: "import gc, sys\ngc.disable()\nsys.setrecursionlimit(50)\nsys.settrace(lambda *a: None)", check: "import gc, sys\nprint(gc.isenabled(), sys.getrecursionlimit() > 50, sys.gettrace())", want: "True True None\n"},
		{name: "audit hook added", setup: "import sys\nsys.addaudithook(lambda *a: None)", check: "print(1)", want: "1\n", retire: true},
		{name: "thread left running", setup: "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()", check: "print(1)", want: "1\n", retire: true},
		{name: "file left open", setup: "import builtins\nbuiltins.__dict__.setdefault('_keep', []).append(open('/dev/null'))\nimport sys\nsys.modules['keep'] = builtins._keep", check: "print(1)", want: "1\n", retire: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := pid(t)
			if _, res := run(t, tc.setup); res.ExitCode != 0 {
				t.Fatalf("setup: %+v", res)
			}
			out, res := run(t, tc.check)
			if out != tc.want || res.ExitCode != tc.exit {
				t.Errorf("check printed %q and exited %d, want %q and %d (%+v)", out, res.ExitCode, tc.want, tc.exit, res.Error)
			}
			after := pid(t)
			if (after != before) != tc.retire {
				t.Errorf("interpreter %s before, %s after; want a new one: %v", before, after, tc.retire)
			}
		})
	}
	if first == "" {
		t.Fatal("no pid")
	}
	// The workspace file of the module case is the zygote's workspace.
	if _, err := os.Stat(filepath.Join(ws, "helper.py")); err != nil {
		t.Errorf("helper.py: %v", err)
	}
}

// TestInterpretersOnly: a zygote keeps a spare child and a fork server for
// forked executions, and drops both at its first execution with fresh
// globals (sandbox.session_interpreter), after which its only descendant
// is the session's interpreter; a forked execution still runs.
func TestInterpretersOnly(t *testing.T) {
	r, _ := startZygote(t, Options{})
	ctx := context.Background()
	hello, err := r.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(req sandbox.ExecRequest) {
		t.Helper()
		req.Code, req.Session, req.Timeout = "print(1)", "s", 20*time.Second
		h := &recHost{}
		if res, err := r.Exec(ctx, req, h); err != nil || res.ExitCode != 0 {
			t.Fatalf("%+v: %v %+v", req, err, res)
		}
	}
	// The warm-up after an execution (spare, fork server) takes a moment.
	settle := func(want int) []int {
		t.Helper()
		var kids []int
		for range 100 {
			if kids = descendantsOf(t, hello.PID); len(kids) == want {
				return kids
			}
			time.Sleep(50 * time.Millisecond)
		}
		return kids
	}
	exec(sandbox.ExecRequest{})
	if kids := settle(2); len(kids) != 2 {
		t.Fatalf("after a forked execution the zygote has descendants %v, want a spare and a fork server", kids)
	}
	exec(sandbox.ExecRequest{Persistent: true, FreshGlobals: true})
	if kids := settle(1); len(kids) != 1 {
		t.Fatalf("after an execution with fresh globals the zygote has descendants %v, want the session's interpreter alone", kids)
	}
	exec(sandbox.ExecRequest{})
	if kids := settle(1); len(kids) != 1 {
		t.Errorf("after another forked execution the zygote has descendants %v, want the interpreter alone (no spare again)", kids)
	}
}

// descendantsOf lists the processes below pid (the spare is the fork
// server's child).
func descendantsOf(t *testing.T, pid int) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	for _, d := range dirs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				parent[n], _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
	}
	var below []int
	for n := range parent {
		// Bounded: a pid reused while /proc was read could make a loop.
		for p, depth := parent[n], 0; p > 1 && depth < 64; p, depth = parent[p], depth+1 {
			if p == pid {
				below = append(below, n)
				break
			}
		}
	}
	return below
}
