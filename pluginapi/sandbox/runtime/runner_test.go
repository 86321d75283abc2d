package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

const python = "/usr/bin/python3"

// recHost records output and answers host calls with fn.
type recHost struct {
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	fn     func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	err    error
}

func (h *recHost) Output(s sandbox.Stream, data []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if s == sandbox.Stdout {
		h.stdout.Write(data)
	} else {
		h.stderr.Write(data)
	}
	return nil
}

func (h *recHost) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if h.fn == nil {
		return nil, &sandbox.CallError{Type: "ToolError", Message: "no such tool"}
	}
	return h.fn(ctx, method, params)
}

func (h *recHost) out() (string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stdout.String(), h.stderr.String()
}

var installOnce struct {
	sync.Once
	dir string
	err error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if installOnce.dir != "" {
		_ = os.RemoveAll(installOnce.dir)
	}
	os.Exit(code)
}

// libDir installs the runtime once per test binary (removed by TestMain).
func libDir(t testing.TB) string {
	installOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cexec-runtime-test-")
		if err == nil {
			err = Install(context.Background(), dir, python)
		}
		installOnce.dir, installOnce.err = dir, err
	})
	if installOnce.err != nil {
		t.Fatal(installOnce.err)
	}
	return installOnce.dir
}

// startZygote runs a zygote as a plain child process (no sandbox: it is
// not a pid namespace init, so it does not sweep).
func startZygote(t testing.TB, opts Options) (*Runner, string) {
	t.Helper()
	return startZygoteWith(t, opts, false)
}

// startZygoteWith starts a zygote with its control channel on descriptors
// 3 and 4, or on stdin and stdout.
func startZygoteWith(t testing.TB, opts Options, stdio bool) (*Runner, string) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		testutil.SkipMissing(t, "no %s", python)
	}
	ws := t.TempDir()
	cfg := testConfig(t, ws)
	cfg.StdioControl = stdio
	return runZygote(t, opts, cfg), ws
}

// testConfig is the zygote configuration of these tests: workspace ws, the
// standard packages, nothing preloaded.
func testConfig(t testing.TB, ws string) ZygoteConfig {
	t.Helper()
	return ZygoteConfig{Python: python, LibDir: libDir(t), Path: []string{ws}, Packages: StandardPackages(ws, t.TempDir()),
		Workdir: ws, Preload: []string{}}
}

// runZygote starts a zygote with cfg as a plain child process.
func runZygote(t testing.TB, opts Options, cfg ZygoteConfig) *Runner {
	t.Helper()
	r, _ := runZygoteStderr(t, opts, cfg)
	return r
}

// runZygoteStderr is runZygote that also returns the zygote's stderr, and
// keeps opts.Logger when one is set.
func runZygoteStderr(t testing.TB, opts Options, cfg ZygoteConfig) (*Runner, *testutil.Buffer) {
	t.Helper()
	return runZygoteArgv(t, opts, cfg, cfg.Command())
}

// runZygoteArgv is runZygoteStderr with the command line argv, which
// starts the zygote of cfg (through a wrapper, say).
func runZygoteArgv(t testing.TB, opts Options, cfg ZygoteConfig, argv []string) (*Runner, *testutil.Buffer) {
	t.Helper()
	stdio := cfg.StdioControl
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	for k, v := range cfg.Env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if stdio {
		cmd.Stdin, cmd.Stdout = inR, outW
	} else {
		cmd.ExtraFiles = []*os.File{inR, outW}
	}
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	pid := cmd.Process.Pid
	opts.Kill = func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	r := NewRunner(inW, outR, opts)
	t.Cleanup(func() {
		r.Close()
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("zygote stderr: %s", stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Ready(ctx); err != nil {
		t.Fatalf("zygote not ready: %v (stderr %s)", err, stderr.String())
	}
	return r, stderr
}

func exec1(t *testing.T, r *Runner, code string, h *recHost) sandbox.ExecResult {
	t.Helper()
	if h == nil {
		h = &recHost{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.Exec(ctx, sandbox.ExecRequest{Code: code}, h)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return res
}

// TestExecPrograms is one table of programs and what they must produce;
// its length is the table.
func TestExecPrograms(t *testing.T) {
	r, _ := startZygote(t, Options{})
	tests := []struct {
		name       string
		code       string
		host       func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
		exit       int
		stdout     string
		stderr     string
		result     string
		errType    string
		errMessage string
		traceback  string
	}{
		{name: "print", code: "print(1+1)", stdout: "2\n"},
		{name: "result", code: "import cexec\ncexec.result({'a': [1, 2]})", result: `{"a":[1,2]}`},
		{name: "result none", code: "import cexec\ncexec.result(None)", result: `null`},
		{name: "exception", code: "def f():\n    raise ValueError('boom')\nf()\n", exit: 1,
			errType: "ValueError", errMessage: "boom", traceback: "    raise ValueError('boom')"},
		{name: "syntax error", code: "def (", exit: 1, errType: "SyntaxError"},
		{name: "sys.exit", code: "import sys\nprint('a')\nsys.exit(3)", exit: 3, stdout: "a\n"},
		{name: "sys.exit message", code: "import sys\nsys.exit('bye')", exit: 1, stderr: "bye\n"},
		{name: "os._exit", code: "import os\nos._exit(5)", exit: 5},
		{name: "raw fd and stderr", code: "import os, sys\nos.write(1, b'raw\\n')\nprint('err', file=sys.stderr)",
			stdout: "raw\n", stderr: "err\n"},
		{name: "subprocess output", code: "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'echo sub; echo suberr >&2'])",
			stdout: "sub\n", stderr: "suberr\n"},
		{name: "clean globals", code: "print('x' in globals(), __name__)", stdout: "False __main__\n"},
		{name: "close fd 3", code: "import os\nos.close(3)\nprint('ok')", stdout: "ok\n"},
		{name: "call_tool", code: "from cexec import call_tool\nprint(call_tool('fs', 'read', {'path': 'a'}))",
			host: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(fmt.Sprintf(`{"method":%q,"params":%s}`, method, params)), nil
			},
			stdout: "{'method': 'call_tool', 'params': {'server': 'fs', 'tool': 'read', 'arguments': {'path': 'a'}}}\n"},
		{name: "tool not found", code: "from cexec import call_tool, ToolError\ntry:\n    call_tool('x', 'y', {})\nexcept ToolError as e:\n    print('caught', e, e.type)",
			stdout: "caught no such tool ToolError\n"},
		{name: "error type", code: "import cexec\ntry:\n    cexec._host_call('m', 1)\nexcept ValueError as e:\n    print('value', e)",
			host: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return nil, &sandbox.CallError{Type: "ValueError", Message: "bad"}
			},
			stdout: "value bad\n"},
		{name: "plain host error", code: "import cexec\ntry:\n    cexec.call_tool('a', 'b')\nexcept cexec.ToolError as e:\n    print(e.type, e)",
			host: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return nil, pluginapi.ErrNotFound
			},
			stdout: "ToolError not found\n"},
		{name: "HostError type on a tool call", code: "import cexec\ntry:\n    cexec.call_tool('a', 'b')\nexcept cexec.ToolError as e:\n    print(e.type, e)",
			host: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return nil, &sandbox.CallError{Type: sandbox.DefaultCallErrorType, Message: "upstream down"}
			},
			stdout: "HostError upstream down\n"},
		{name: "other host call error", code: "import cexec\ntry:\n    cexec._host_call('checkpoint', {})\nexcept cexec.HostError as e:\n    print(type(e).__name__, e.type, e)",
			host: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return nil, errors.New("no checkpoints here")
			},
			stdout: "HostError HostError no checkpoints here\n"},
		{name: "uncaught tool error", code: "from cexec import call_tool\ncall_tool('x', 'y')", exit: 1, errType: "ToolError", errMessage: "no such tool"},
		{name: "threads", code: "import threading\nfrom cexec import call_tool\nout = {}\ndef w(i):\n    out[i] = call_tool('s', 't', {'i': i})['i']\n" +
			"ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out.items()) == [(i, i) for i in range(8)])",
			host: func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
				var p struct{ Arguments json.RawMessage }
				_ = json.Unmarshal(params, &p)
				time.Sleep(5 * time.Millisecond)
				return p.Arguments, nil
			},
			stdout: "True\n"},
		// One calling thread at a time reads the replies for all: out of
		// order, each must reach its caller.
		{name: "threads answered in reverse order", code: "import threading\nfrom cexec import call_tool\nout = {}\ndef w(i):\n    out[i] = call_tool('s', 't', {'i': i, 'ms': 5 * (8 - i)})['i']\n" +
			"ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]\n[t.start() for t in ts]\nw(8)\n[t.join() for t in ts]\nprint(sorted(out.items()) == [(i, i) for i in range(9)])",
			host: delayedEcho, stdout: "True\n"},
		// A signal handler's exception ends the main thread's call, whether
		// it was waiting (the other thread called first and reads) or
		// reading (the other thread calls 20 ms later); the other thread's
		// call and later ones still get their replies.
		{name: "call interrupted while waiting", code: interrupted(0), host: delayedEcho, stdout: "timed out\n1 2\n"},
		{name: "call interrupted while reading", code: interrupted(0.02), host: delayedEcho, stdout: "timed out\n1 2\n"},
		{name: "non-daemon thread joined", code: "import threading, time\ndef w():\n    time.sleep(0.05)\n    print('late')\nthreading.Thread(target=w).start()", stdout: "late\n"},
		{name: "result not json", code: "import cexec\ncexec.result(float('nan'))", exit: 1, errType: "ValueError"},
		{name: "progress", code: "import cexec\nprint(cexec.progress(2, 5, 'two'), cexec.progress(3.5))",
			host: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
				if method != "progress" {
					return nil, fmt.Errorf("method %s", method)
				}
				var p struct {
					Progress float64  `json:"progress"`
					Total    *float64 `json:"total"`
					Message  *string  `json:"message"`
				}
				if err := json.Unmarshal(params, &p); err != nil || p.Progress < 2 || (p.Total != nil) != (p.Message != nil) {
					return nil, fmt.Errorf("params %s", params)
				}
				return json.RawMessage("null"), nil
			},
			stdout: "None None\n"},
		{name: "progress type", code: "import cexec\ncexec.progress('half')", exit: 1, errType: "TypeError", errMessage: "cexec.progress: done must be a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &recHost{fn: tc.host}
			res := exec1(t, r, tc.code, h)
			stdout, stderr := h.out()
			if res.ExitCode != tc.exit {
				t.Errorf("exit code %d, want %d (error %+v, stderr %q)", res.ExitCode, tc.exit, res.Error, stderr)
			}
			if stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout, tc.stdout)
			}
			if tc.stderr != "" && stderr != tc.stderr {
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
			if string(res.Result) != tc.result {
				t.Errorf("result %s, want %s", res.Result, tc.result)
			}
			switch {
			case tc.errType == "" && res.Error != nil:
				t.Errorf("unexpected error %+v", res.Error)
			case tc.errType != "" && (res.Error == nil || res.Error.Type != tc.errType):
				t.Errorf("error %+v, want type %s", res.Error, tc.errType)
			case tc.errType != "" && tc.errMessage != "" && res.Error.Message != tc.errMessage:
				t.Errorf("error message %q, want %q", res.Error.Message, tc.errMessage)
			case tc.traceback != "" && !strings.Contains(res.Error.Traceback, tc.traceback):
				t.Errorf("traceback %q does not contain %q", res.Error.Traceback, tc.traceback)
			}
			if !res.SandboxOK {
				t.Errorf("sandbox reported not OK")
			}
		})
	}
}

// TestProgressInLoop: cexec.progress is cheap in a loop (calls close
// together are not sent), and the one reaching total always goes.
func TestProgressInLoop(t *testing.T) {
	r, _ := startZygote(t, Options{})
	var mu sync.Mutex
	var sent []float64
	h := &recHost{fn: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		var p struct{ Progress float64 }
		if err := json.Unmarshal(params, &p); err != nil || method != "progress" {
			return nil, fmt.Errorf("%s %s", method, params)
		}
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, p.Progress)
		return json.RawMessage("null"), nil
	}}
	res, err := r.Exec(context.Background(), sandbox.ExecRequest{Code: "import cexec\nfor i in range(1, 2001):\n    cexec.progress(i, 2000)"}, h)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) == 0 || sent[0] != 1 || sent[len(sent)-1] != 2000 {
		t.Errorf("sent %v, want the first and the last of 2000 among them", sent)
	}
	t.Logf("%d of 2000 cexec.progress calls reached the host", len(sent))
}

func TestTracebackHidesRunner(t *testing.T) {
	r, _ := startZygote(t, Options{})
	res := exec1(t, r, "x = 1\n1/0\n", nil)
	if res.Error == nil || res.Error.Type != "ZeroDivisionError" {
		t.Fatalf("error %+v", res.Error)
	}
	want := "Traceback (most recent call last):\n  File \"<cexec>\", line 2, in <module>\n    1/0\n"
	if !strings.HasPrefix(res.Error.Traceback, want) {
		t.Errorf("traceback %q, want prefix %q", res.Error.Traceback, want)
	}
}

func TestPersistentSession(t *testing.T) {
	r, _ := startZygote(t, Options{})
	ctx := context.Background()
	run := func(code string, persistent bool, session string) (string, sandbox.ExecResult) {
		h := &recHost{}
		res, err := r.Exec(ctx, sandbox.ExecRequest{Code: code, Persistent: persistent, Session: session}, h)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := h.out()
		return out, res
	}
	if out, res := run("x = 41\nimport cexec\ncexec.result(x)", true, "s1"); out != "" || string(res.Result) != "41" || !res.SandboxOK {
		t.Fatalf("first: %q %+v", out, res)
	}
	if out, _ := run("x += 1\nprint(x)", true, "s1"); out != "42\n" {
		t.Errorf("same session sees %q, want 42", out)
	}
	if out, _ := run("print('x' in globals())", true, "s2"); out != "False\n" {
		t.Errorf("other session sees %q", out)
	}
	if out, _ := run("print('x' in globals())", false, ""); out != "False\n" {
		t.Errorf("forked execution sees %q", out)
	}
	// An exception or sys.exit keeps the interpreter and its state.
	if _, res := run("import sys\nsys.exit(4)", true, "s1"); res.ExitCode != 4 {
		t.Errorf("exit code %d", res.ExitCode)
	}
	if _, res := run("raise KeyError('k')", true, "s1"); res.Error == nil || res.Error.Type != "KeyError" {
		t.Errorf("error %+v", res.Error)
	}
	if out, res := run("print(x)", true, "s1"); out != "42\n" || res.SessionLost {
		t.Errorf("state after errors: %q, session lost %v", out, res.SessionLost)
	}
	// A program that ends its interpreter ends the session's state, and
	// the result says so.
	if _, res := run("y = 1\nimport os\nos._exit(3)", true, "s3"); !res.SessionLost || res.ExitCode != 3 {
		t.Errorf("os._exit: session lost %v, exit code %d; want true, 3", res.SessionLost, res.ExitCode)
	}
	if out, _ := run("print('y' in globals())", true, "s3"); out != "False\n" {
		t.Errorf("state after os._exit: %q", out)
	}
	// A timeout kills the interpreter; the session starts over.
	_, res := func() (string, sandbox.ExecResult) {
		h := &recHost{}
		res, err := r.Exec(ctx, sandbox.ExecRequest{Code: "while True: pass", Persistent: true, Session: "s1", Timeout: 200 * time.Millisecond}, h)
		if err != nil {
			t.Fatal(err)
		}
		return "", res
	}()
	if !res.TimedOut || !res.SessionLost {
		t.Errorf("not timed out, or the session not lost: %+v", res)
	}
	if out, _ := run("print('x' in globals())", true, "s1"); out != "False\n" {
		t.Errorf("state after timeout: %q", out)
	}
	if err := r.EndSession("s2"); err != nil {
		t.Fatal(err)
	}
	if out, _ := run("print('ok')", true, "s2"); out != "ok\n" {
		t.Errorf("after end_session: %q", out)
	}
}

func TestLimits(t *testing.T) {
	r, _ := startZygote(t, Options{OutputLimit: 1000})
	ctx := context.Background()

	h := &recHost{}
	res, err := r.Exec(ctx, sandbox.ExecRequest{Code: "while True: pass", Timeout: 200 * time.Millisecond}, h)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Error == nil || res.Error.Type != "Timeout" || res.SandboxOK {
		t.Errorf("timeout result %+v", res)
	}
	h = &recHost{}
	res, err = r.Exec(ctx, sandbox.ExecRequest{Code: "import sys\nwhile True: sys.stdout.write('x' * 4096)"}, h)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := h.out()
	if !res.OutputTruncated || res.Error == nil || res.Error.Type != "OutputLimit" || len(out) != 1000 {
		t.Errorf("output cap: len %d, %+v", len(out), res)
	}
	if !res.SandboxOK || !r.Healthy() {
		t.Errorf("sandbox not OK after an enforced output cap: %+v", res)
	}

	if res := exec1(t, r, "print('still here')", nil); res.ExitCode != 0 {
		t.Errorf("after limits: %+v", res)
	}
}

// TestKilledForMemory: a program killed by SIGKILL is told it ran out of
// memory when the memory cgroup's count of kills at the limit rose, in
// either cgroup version's file. The programs here fake the kernel: they
// write the count, then kill themselves.
func TestKilledForMemory(t *testing.T) {
	for _, tt := range []struct {
		name          string
		before, after string // the file's content; "" for no file configured
		// earlier, when set, is what an execution that ends normally writes
		// first: a kill at the limit of a process it started.
		earlier   string
		typ, says string
		notSays   string
		// absentFirst names a file that does not exist before the real one
		// (a pod that may be on a cgroup v1 or v2 node).
		absentFirst bool
	}{
		{name: "no file", typ: "Killed", says: "the program was killed by SIGKILL (possibly out of memory)"},
		{name: "v1 count rose", before: "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", after: "oom_kill_disable 0\nunder_oom 1\noom_kill 1\n",
			typ: "MemoryError", says: "the program ran out of memory: the kernel killed it on reaching the sandbox's memory limit of 128.0 MiB"},
		{name: "v2 count rose", before: "low 0\nhigh 0\nmax 0\noom 0\noom_kill 2\n", after: "low 0\nhigh 0\nmax 7\noom 1\noom_kill 3\n",
			typ: "MemoryError", says: "memory limit of 128.0 MiB"},
		{name: "a microVM's /proc/vmstat", before: "nr_free_pages 30512\npgfault 811532\noom_kill 0\nnr_unstable 0\n",
			after: "nr_free_pages 98\npgfault 902213\noom_kill 1\nnr_unstable 0\n", typ: "MemoryError", says: "memory limit of 128.0 MiB"},
		{name: "the first of two files that exists", absentFirst: true, before: "oom_kill 0\n", after: "oom_kill 1\n",
			typ: "MemoryError", says: "memory limit of 128.0 MiB"},
		{name: "count unchanged", before: "oom_kill 4\n", after: "oom_kill 4\n", typ: "Killed", says: "the program was killed by SIGKILL", notSays: "memory"},
		{name: "an earlier execution's kill", before: "oom_kill 0\n", earlier: "oom_kill 1\n", after: "oom_kill 1\n",
			typ: "Killed", says: "the program was killed by SIGKILL", notSays: "memory"},
		{name: "kernel without the count", before: "oom_kill_disable 0\nunder_oom 0\n", after: "oom_kill_disable 0\nunder_oom 0\n",
			typ: "Killed", says: "(possibly out of memory)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			events := filepath.Join(t.TempDir(), "memory.events")
			if tt.before != "" {
				if err := os.WriteFile(events, []byte(tt.before), 0o644); err != nil {
					t.Fatal(err)
				}
				cfg.MemoryEvents, cfg.MemoryLimit = events, 128<<20
				if tt.absentFirst {
					cfg.MemoryEvents = filepath.Join(t.TempDir(), "memory.oom_control") + ":" + events
				}
			}
			r := runZygote(t, Options{}, cfg)
			if tt.earlier != "" {
				if res := exec1(t, r, fmt.Sprintf("open(%q, 'w').write(%q)", events, tt.earlier), nil); res.ExitCode != 0 {
					t.Fatalf("earlier execution: %+v", res)
				}
			}
			code := fmt.Sprintf("import os, signal\nif %q:\n    open(%q, 'w').write(%q)\nos.kill(os.getpid(), signal.SIGKILL)", tt.before, events, tt.after)
			res := exec1(t, r, code, nil)
			if res.ExitCode != 137 || res.Error == nil || res.Error.Type != tt.typ || !strings.Contains(res.Error.Message, tt.says) {
				t.Fatalf("result %+v, error %+v; want %s saying %q", res, res.Error, tt.typ, tt.says)
			}
			if tt.notSays != "" && strings.Contains(res.Error.Message, tt.notSays) {
				t.Errorf("the error says %q, which it must not", res.Error.Message)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	r, _ := startZygote(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := r.Exec(ctx, sandbox.ExecRequest{Code: "import time\ntime.sleep(30)"}, &recHost{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Type != "Killed" || res.SandboxOK {
		t.Errorf("cancelled result %+v", res)
	}
	if !r.Healthy() {
		t.Fatalf("runner unhealthy after cancel: %v", r.Err())
	}

	h := &recHost{err: errors.New("client went away")}
	_, err = r.Exec(context.Background(), sandbox.ExecRequest{Code: "import time\nwhile True:\n    print('x', flush=True)\n    time.sleep(0.01)"}, h)
	if err == nil || !strings.Contains(err.Error(), "client went away") {
		t.Errorf("output failure: err %v", err)
	}
}

func TestZygoteKilledByProgram(t *testing.T) {
	r, _ := startZygote(t, Options{})
	res := exec1(t, r, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(5)", nil)
	if res.SandboxOK || res.Error == nil {
		t.Errorf("result %+v", res)
	}
	if r.Healthy() {
		t.Errorf("runner healthy after its zygote died")
	}
	_, err := r.Exec(context.Background(), sandbox.ExecRequest{Code: "print(1)"}, &recHost{})
	if !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Errorf("exec on a dead runner: %v", err)
	}
}

// timedHost records when output arrives, and the order of output and calls.
type timedHost struct {
	recHost
	start  time.Time
	events []string // "out:<data>@<ms>" and "call"
}

func (h *timedHost) Output(s sandbox.Stream, data []byte) error {
	h.mu.Lock()
	h.events = append(h.events, fmt.Sprintf("out:%s@%d", strings.TrimSpace(string(data)), time.Since(h.start).Milliseconds()))
	h.mu.Unlock()
	return h.recHost.Output(s, data)
}

func (h *timedHost) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	h.events = append(h.events, "call")
	h.mu.Unlock()
	return json.RawMessage(`{"content": [], "isError": false}`), nil
}

// TestOutputIsLive checks that the zygote, which batches output briefly
// with what follows it, still relays output while the program runs, and
// before a host call the program makes after printing.
func TestOutputIsLive(t *testing.T) {
	r, _ := startZygote(t, Options{})
	h := &timedHost{start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.Exec(ctx, sandbox.ExecRequest{Code: "import time\nfrom cexec import call_tool\nprint('a', flush=True)\n" +
		"time.sleep(0.5)\nprint('b', flush=True)\ncall_tool('s', 't', {})\nprint('c')"}, h)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v, result %+v", err, res)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) != 4 || !strings.HasPrefix(h.events[0], "out:a@") || !strings.HasPrefix(h.events[1], "out:b@") ||
		h.events[2] != "call" || !strings.HasPrefix(h.events[3], "out:c@") {
		t.Fatalf("events %q: want a, b, the call, c", h.events)
	}
	if ms, _ := strconv.Atoi(strings.TrimPrefix(h.events[0], "out:a@")); ms >= 400 {
		t.Errorf("'a' arrived after %d ms: want it well before the program's 0.5 s sleep ends", ms)
	}
}

func TestPing(t *testing.T) {
	r, _ := startZygote(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := r.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.RSSBytes < 1<<20 {
		t.Errorf("rss %d", p.RSSBytes)
	}
}

// TestRehearsalIsSilent runs programs with pauses between them, in which the
// zygote forks a spare and rehearses an execution's path (Zygote.rehearse):
// nothing of a rehearsal may reach the host, count as an execution, or
// disturb the spare that runs the next program.
func TestRehearsalIsSilent(t *testing.T) {
	log := &testutil.Buffer{}
	r, stderr := runZygoteStderr(t, Options{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: log})},
		ZygoteConfig{Python: python, LibDir: libDir(t), Workdir: t.TempDir(), Preload: []string{}})
	programs := []struct{ code, out string }{
		{"print(1+1)", "2\n"},
		{"import sys\nprint('x', file=sys.stderr)\nprint(3)", "3\n"},
		{"import cexec\ncexec.result({'n': 4})", ""},
		{"print('after', 5)", "after 5\n"},
	}
	for _, p := range programs {
		time.Sleep(100 * time.Millisecond) // the spare is forked after an execution, the rehearsal 20 ms later
		h := &recHost{}
		res := exec1(t, r, p.code, h)
		if out, _ := h.out(); res.ExitCode != 0 || res.Error != nil || out != p.out {
			t.Fatalf("%q: stdout %q, result %+v", p.code, out, res)
		}
	}
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pong, err := r.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pong.Executions != int64(len(programs)) {
		t.Errorf("zygote counted %d executions, want %d", pong.Executions, len(programs))
	}
	if strings.Contains(log.String(), "outside an execution") {
		t.Errorf("frames reached the host outside an execution:\n%s", log.String())
	}
	if strings.Contains(stderr.String(), "rehearsal") {
		t.Errorf("rehearsal failed: %s", stderr.String())
	}
}

func TestWorkspaceImports(t *testing.T) {
	r, ws := startZygote(t, Options{})
	if err := os.MkdirAll(filepath.Join(ws, "skills", "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "skills", "demo", "__init__.py"), []byte("def run():\n    return 'demo ran'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &recHost{}
	res := exec1(t, r, "from skills.demo import run\nprint(run())", h)
	if out, _ := h.out(); out != "demo ran\n" {
		t.Errorf("stdout %q, result %+v", out, res)
	}
	// A module one execution writes is importable in the next ones, right
	// away: the zygote's import caches must not hide it.
	for i := range 3 {
		h = &recHost{}
		code := fmt.Sprintf("open('helper%d.py', 'w').write('X = %d')\n", i, i)
		if i > 0 {
			code += fmt.Sprintf("import helper%d\nprint(helper%d.X)\n", i-1, i-1)
		}
		res = exec1(t, r, code, h)
		if out, _ := h.out(); i > 0 && out != fmt.Sprintf("%d\n", i-1) {
			t.Errorf("execution %d: stdout %q, result %+v %+v", i, out, res, res.Error)
		}
	}
}

// TestPythonTypes type-checks the runtime's Python with mypy --strict when
// mypy is installed.
func TestPythonTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("mypy is slow")
	}
	mypy, err := exec.LookPath("mypy")
	if err != nil {
		testutil.SkipMissing(t, "mypy is not installed")
	}
	cmd := exec.Command(mypy, "--strict", "--python-executable", python, "--cache-dir", t.TempDir(), "cexec", "_cexec_paths.py", "sitecustomize.py")
	cmd.Dir = "python"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("mypy: %v\n%s", err, out)
	}
}

// TestStdioControl runs the zygote the way a backend with only stdio would:
// programs must not reach the control channel through their stdin.
func TestStdioControl(t *testing.T) {
	r, _ := startZygoteWith(t, Options{}, true)
	h := &recHost{fn: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"answer"`), nil
	}}
	res := exec1(t, r, "import sys, os\nprint(repr(sys.stdin.read()), os.read(0, 10))\nfrom cexec import call_tool\nprint(call_tool('s', 't'))", h)
	if out, errOut := h.out(); out != "'' b''\nanswer\n" || res.ExitCode != 0 {
		t.Errorf("stdout %q stderr %q result %+v", out, errOut, res)
	}
	if res := exec1(t, r, "print(2)", nil); res.ExitCode != 0 || !r.Healthy() {
		t.Errorf("second execution %+v", res)
	}
}

// delayedEcho answers a call with its arguments after arguments.ms
// milliseconds.
func delayedEcho(ctx context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
	var p struct {
		Arguments json.RawMessage
	}
	var a struct {
		MS int `json:"ms"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(p.Arguments, &a); err != nil {
		return nil, err
	}
	select {
	case <-time.After(time.Duration(a.MS) * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.Arguments, nil
}

// interrupted is a program whose main thread's call is ended by a SIGALRM
// handler's exception while another thread, started first and calling
// after delay seconds, makes a call of its own.
func interrupted(delay float64) string {
	return fmt.Sprintf(`import signal, threading, time
from cexec import call_tool
def alarm(*a):
    raise TimeoutError('alarm')
signal.signal(signal.SIGALRM, alarm)
res = {}
def other():
    time.sleep(%g)
    res['t'] = call_tool('s', 't', {'i': 1, 'ms': 300})['i']
t = threading.Thread(target=other)
t.start()
time.sleep(0.01)
signal.setitimer(signal.ITIMER_REAL, 0.1)
try:
    call_tool('s', 't', {'i': 0, 'ms': 1000})
except TimeoutError:
    print('timed out')
t.join()
print(res['t'], call_tool('s', 't', {'i': 2, 'ms': 0})['i'])
`, delay)
}
