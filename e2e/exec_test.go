package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// sbxCmd is cexecctl against s's socket, for tests that need its pipes.
func sbxCmd(ctx context.Context, s setup, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), args...)
	cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+s.sock)
	return cmd
}

// sbxResult is `cexecctl exec --json` output.
type sbxResult struct {
	Stdout   string          `json:"stdout"`
	Stderr   string          `json:"stderr"`
	ExitCode int             `json:"exit_code"`
	Result   json.RawMessage `json:"result"`
	Error    *struct {
		Type      string `json:"type"`
		Message   string `json:"message"`
		Traceback string `json:"traceback"`
	} `json:"error"`
	DurationMS  float64 `json:"duration_ms"`
	MaxRSSBytes int64   `json:"max_rss_bytes"`
	TimedOut    bool    `json:"timed_out"`
	SandboxID   string  `json:"sandbox_id"`
	ToolCalls   []struct {
		Server string `json:"server"`
		Tool   string `json:"tool"`
		OK     bool   `json:"ok"`
	} `json:"tool_calls"`
	Warnings []string `json:"warnings"`
}

// sbxJSON runs `cexecctl exec --json` and decodes its output.
func sbxJSON(t *testing.T, s setup, args ...string) (sbxResult, int) {
	t.Helper()
	out, errOut, code := ctl(t, s, append([]string{"exec", "--json"}, args...)...)
	var r sbxResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exec --json %v: exit %d, %v\nstdout: %s\nstderr: %s", args, code, err, out, errOut)
	}
	return r, code
}

// sandboxOrSkip skips when bubblewrap cannot run here, with the backend's
// own reason, and fails on any other problem.
func sandboxOrSkip(t *testing.T, s setup) {
	t.Helper()
	out, errOut, code := ctl(t, s, "exec", "-c", "print(1+1)")
	if code == 0 && out == "2\n" {
		return
	}
	for _, why := range []string{"bubblewrap", "user namespaces", "cannot create a sandbox", "no sandbox backend"} {
		if strings.Contains(errOut, why) {
			testutil.SkipMissing(t, "sandboxes cannot run on this machine: %s", strings.TrimSpace(errOut))
		}
	}
	t.Fatalf("exec print(1+1): exit %d\nstdout: %q\nstderr: %s", code, out, errOut)
}

// workspaceDir is tenant's /workspace as the host sees it.
func workspaceDir(s setup, tenant string) string {
	return filepath.Join(s.dir, "data", "tenants", tenant, "workspace")
}

// daemonServes fails the test unless d still runs and executes code.
func daemonServes(t *testing.T, s setup, d *daemon) {
	t.Helper()
	select {
	case <-d.exited:
		t.Fatalf("cexecd exited: %v", d.cmd.ProcessState)
	default:
	}
	if out, errOut, code := ctl(t, s, "exec", "-c", "print(1+1)"); code != 0 || out != "2\n" {
		t.Fatalf("the next exec: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
}

// TestExec drives one real cexecd through the scenario below.
// It is long because one daemon and its warm pool serve every subtest, in
// the order a user would run them; a daemon per check would cost seconds.
func TestExec(t *testing.T) {
	s := newSetup(t)
	d := startDaemon(t, s)
	sandboxOrSkip(t, s)

	t.Run("happy path", func(t *testing.T) {
		out, errOut, code := ctl(t, s, "exec", "-c", "import sys\nprint(1+1)\nprint('to stderr', file=sys.stderr)")
		if code != 0 || out != "2\n" || errOut != "to stderr\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})

	t.Run("exit code", func(t *testing.T) {
		for _, tc := range []struct {
			name, code string
			exit       int
			stderr     string
		}{
			{"sys.exit(3)", "import sys\nprint('bye')\nsys.exit(3)", 3, ""},
			{"sys.exit(0)", "import sys\nsys.exit(0)", 0, ""},
			{"sys.exit(message)", "import sys\nsys.exit('bye')", 1, "bye"},
			{"os._exit(5)", "import os\nos._exit(5)", 5, ""},
			{"uncaught exception", "def f():\n    raise ValueError('boom')\nf()", 1, "ValueError: boom"},
			{"syntax error", "print(", 1, "SyntaxError"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, errOut, code := ctl(t, s, "exec", "-c", tc.code)
				if code != tc.exit || !strings.Contains(errOut, tc.stderr) {
					t.Fatalf("exit %d, want %d; stderr %q, want it to contain %q", code, tc.exit, errOut, tc.stderr)
				}
			})
		}
		// The traceback names the user's line.
		if _, errOut, _ := ctl(t, s, "exec", "-c", "x = 1\nraise KeyError('k')"); !strings.Contains(errOut, "line 2") {
			t.Errorf("traceback without the failing line: %s", errOut)
		}
	})

	t.Run("program sources", func(t *testing.T) {
		file := filepath.Join(s.dir, "prog.py")
		if err := os.WriteFile(file, []byte("print('from a file')\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			args  []string
			stdin string
			want  string
		}{
			{"file", []string{"exec", file}, "", "from a file\n"},
			{"stdin", []string{"exec"}, "print('from stdin')\n", "from stdin\n"},
			{"dash", []string{"exec", "-"}, "print('from dash')\n", "from dash\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := sbxCmd(ctx, s, tc.args...)
				cmd.Stdin = strings.NewReader(tc.stdin)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil || string(out) != tc.want {
					t.Fatalf("%v: %v, stdout %q, stderr %s", tc.args, err, out, stderr.String())
				}
			})
		}
		_, errOut, code := ctl(t, s, "exec", "-c", "print(1)", file)
		if code != 2 || !strings.Contains(errOut, "not both") {
			t.Errorf("-c and FILE together: exit %d, %s", code, errOut)
		}
	})

	t.Run("json", func(t *testing.T) {
		r, code := sbxJSON(t, s, "-c", "import sys\nfrom cexec import result\nprint('out')\nprint('err', file=sys.stderr)\nresult({'answer': 42})\nsys.exit(5)")
		if code != 5 || r.ExitCode != 5 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.Error != nil || r.TimedOut {
			t.Errorf("exit %d: %+v", code, r)
		}
		var res struct{ Answer int }
		if err := json.Unmarshal(r.Result, &res); err != nil || res.Answer != 42 {
			t.Errorf("result %s: %v", r.Result, err)
		}
		if r.DurationMS <= 0 || r.MaxRSSBytes <= 0 || !strings.HasPrefix(r.SandboxID, "sbx-") || r.ToolCalls == nil {
			t.Errorf("duration, usage, sandbox or tool calls missing: %+v", r)
		}
		r, _ = sbxJSON(t, s, "-c", "raise RuntimeError('nope')")
		if r.Error == nil || r.Error.Type != "RuntimeError" || r.Error.Message != "nope" || !strings.Contains(r.Error.Traceback, "RuntimeError") || r.ExitCode != 1 {
			t.Errorf("error in --json: %+v", r)
		}
	})

	t.Run("output streams live", func(t *testing.T) {
		// The program cannot end before the test has read its first lines
		// from cexecctl: it waits for a file the test writes only then.
		ws := workspaceDir(s, "default")
		marker := "go-" + fmt.Sprint(time.Now().UnixNano())
		code := fmt.Sprintf("import os, sys, time\nprint('first')\nprint('first err', file=sys.stderr)\n"+
			"deadline = time.time() + 20\nwhile not os.path.exists('/workspace/%s') and time.time() < deadline:\n    time.sleep(0.02)\n"+
			"print('done' if os.path.exists('/workspace/%s') else 'gave up')\n", marker, marker)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := sbxCmd(ctx, s, "exec", "-c", code)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out, errs := bufio.NewReader(stdout), bufio.NewReader(stderr)
		if l, err := out.ReadString('\n'); l != "first\n" {
			t.Fatalf("first stdout line %q (%v)", l, err)
		}
		if l, err := errs.ReadString('\n'); l != "first err\n" {
			t.Fatalf("first stderr line %q (%v)", l, err)
		}
		if err := os.WriteFile(filepath.Join(ws, marker), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(out)
		_, _ = io.ReadAll(errs)
		if err := cmd.Wait(); err != nil || string(rest) != "done\n" {
			t.Fatalf("after the marker: %v, stdout %q", err, rest)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		_, errOut, code := ctl(t, s, "exec", "--timeout", "1s", "-c", "while True:\n    pass")
		if code == 0 || !strings.Contains(errOut, "Timeout") {
			t.Fatalf("infinite loop with --timeout 1s: exit %d, stderr %s", code, errOut)
		}
		t.Logf("infinite loop stopped after %s", time.Since(start).Round(time.Millisecond))
		r, _ := sbxJSON(t, s, "--timeout", "500ms", "-c", "import time\nprint('before', flush=True)\ntime.sleep(60)")
		if !r.TimedOut || r.Error == nil || r.Error.Type != "Timeout" || r.Stdout != "before\n" {
			t.Errorf("--json of a timed-out program: %+v", r)
		}
		// Out of range is refused in words before a sandbox is taken: the
		// runner failed on 99999h, and 0s or -1s ran with the default.
		for _, tc := range []struct {
			timeout, want string
			code          int
		}{
			{"99999h", "timeout 99999h0m0s is longer than the 24h0m0s cexecd allows", 1},
			{"0s", "--timeout must be at least 1ms", 2},
			{"-1s", "--timeout must be at least 1ms", 2},
		} {
			_, errOut, code := ctl(t, s, "exec", "--timeout", tc.timeout, "-c", "print(1)")
			if code != tc.code || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "rpc error") {
				t.Errorf("--timeout %s: exit %d, stderr %s; want %d with %q", tc.timeout, code, errOut, tc.code, tc.want)
			}
		}
		daemonServes(t, s, d)
	})

	t.Run("unknown tool", func(t *testing.T) {
		r, code := sbxJSON(t, s, "-c", "from cexec import call_tool, ToolError\n"+
			"try:\n    call_tool('no-such-server', 'no_tool', {})\nexcept ToolError as e:\n    print(e.type)\n")
		if code != 0 || r.Stdout != "ToolNotFound\n" {
			t.Fatalf("exit %d: %+v", code, r)
		}
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].Server != "no-such-server" || r.ToolCalls[0].OK {
			t.Errorf("tool call record: %+v", r.ToolCalls)
		}
		// Uncaught, it fails the program like any exception; the traceback
		// ends at the program's line, without the runtime's frames, and
		// says the message once.
		r, code = sbxJSON(t, s, "-c", "from cexec import call_tool\ncall_tool('no-such-server', 'no_tool')")
		if code != 1 || r.Error == nil || r.Error.Type != "ToolError" {
			t.Fatalf("uncaught ToolNotFound: exit %d, %+v", code, r)
		}
		if tb := r.Error.Traceback; strings.Contains(tb, "cexec/__init__.py") || strings.Count(tb, r.Error.Message) != 1 ||
			!strings.Contains(tb, "line 2, in <module>\n    call_tool('no-such-server', 'no_tool')\n") {
			t.Errorf("traceback:\n%s", tb)
		}
	})

	// The sandbox has no network; a program that tries learns why its
	// connection failed and what to do instead.
	t.Run("no network", func(t *testing.T) {
		for _, code := range []string{
			"import urllib.request\nurllib.request.urlopen('http://example.com', timeout=5)",
			"import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=5)",
		} {
			r, exit := sbxJSON(t, s, "-c", code)
			if exit != 1 || r.Error == nil || !strings.Contains(r.Error.Traceback, "the sandbox has no network access; call tools through servers.<name> instead") {
				t.Errorf("%s: exit %d, %+v", code, exit, r.Error)
			}
		}
		if _, errOut, _ := ctl(t, s, "exec", "-c", "raise OSError('disk')"); strings.Contains(errOut, "network") {
			t.Errorf("an unrelated OSError got the network note: %s", errOut)
		}
	})

	t.Run("tenants are isolated", func(t *testing.T) {
		secretFile := "secret-" + fmt.Sprint(time.Now().UnixNano()) + ".txt"
		if out := mustCtl(t, s, "exec", "--tenant", "alice", "-c",
			fmt.Sprintf("open('/workspace/%s', 'w').write('alice only')\nprint(open('/workspace/%s').read())", secretFile, secretFile)); out != "alice only\n" {
			t.Fatalf("alice's write: %q", out)
		}
		if _, err := os.Stat(filepath.Join(workspaceDir(s, "alice"), secretFile)); err != nil {
			t.Fatalf("alice's file is not in her workspace on the host: %v", err)
		}
		aliceHost := filepath.Join(workspaceDir(s, "alice"), secretFile)
		probe := fmt.Sprintf(`import os
paths = [%q, %q, %q, %q]
for p in paths:
    try:
        open(p).read()
        print("READ", p)
    except OSError as e:
        print("blocked", type(e).__name__)
print("listed" if any(%q in fs for _, _, fs in os.walk("/workspace")) else "absent")
`, "/workspace/"+secretFile, aliceHost, "/workspace/../alice/workspace/"+secretFile, "/proc/1/root"+aliceHost, secretFile)
		out := mustCtl(t, s, "exec", "--tenant", "bob", "-c", probe)
		if strings.Contains(out, "READ") || !strings.HasSuffix(out, "absent\n") || strings.Count(out, "blocked") != 4 {
			t.Fatalf("bob reached alice's file:\n%s", out)
		}
		// Bob's sandboxes are his own: alice's sandbox ids never serve him.
		a, _ := sbxJSON(t, s, "--tenant", "alice", "-c", "pass")
		b, _ := sbxJSON(t, s, "--tenant", "bob", "-c", "pass")
		if a.SandboxID == b.SandboxID || !strings.Contains(a.SandboxID, "alice") || !strings.Contains(b.SandboxID, "bob") {
			t.Errorf("sandboxes: alice %s, bob %s", a.SandboxID, b.SandboxID)
		}
	})

	t.Run("bombs are contained", func(t *testing.T) {
		for _, tc := range []struct{ name, code, says string }{
			{"fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", ""},
			{"memory bomb", "x = []\nwhile True:\n    x.append(bytearray(64 << 20))\n", "MemoryError"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				start := time.Now()
				_, errOut, code := ctl(t, s, "exec", "--timeout", "5s", "-c", tc.code)
				if code == 0 {
					t.Fatalf("the %s exited 0", tc.name)
				}
				t.Logf("%s stopped after %s: exit %d, %s", tc.name, time.Since(start).Round(time.Millisecond), code, lastLine(errOut))
				if !strings.Contains(errOut, tc.says) {
					t.Errorf("the %s's error does not say %q:\n%s", tc.name, tc.says, errOut)
				}
				daemonServes(t, s, d)
			})
		}
		if out := mustCtl(t, s, "status"); !strings.Contains(out, "0 failed") {
			t.Errorf("status after the bombs:\n%s", out)
		}
	})

	t.Run("pool status", func(t *testing.T) {
		var st struct {
			Backend   string           `json:"backend"`
			MaxTotal  int              `json:"max_total"`
			Idle      map[string]int   `json:"idle"`
			Targets   map[string]int   `json:"targets"`
			Sandboxes []map[string]any `json:"sandboxes"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "pool", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Backend != "bwrap" || st.MaxTotal != 16 || st.Idle["default"] < 1 || st.Targets["default"] < 2 || len(st.Sandboxes) == 0 {
			t.Fatalf("pool --json: %+v", st)
		}
		for _, sb := range st.Sandboxes {
			if rss, _ := sb["rss_bytes"].(string); sb["state"] == "idle" && (rss == "" || rss == "0") {
				t.Errorf("idle sandbox without RSS: %v", sb)
			}
		}
		out := mustCtl(t, s, "pool")
		for _, want := range []string{"backend    bwrap", "TENANT", "default", "alice", "bob", "MiB"} {
			if !strings.Contains(out, want) {
				t.Errorf("pool lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestExecPoolFull: with room for one sandbox, a second execution while the
// first runs waits queue_timeout for it, then is refused with a clear
// error; once the first ends (its client gone), executions run again.
func TestExecPoolFull(t *testing.T) {
	s := newSetup(t)
	appendConfig(t, s, "\nsandbox {\n  pool {\n    warm          = 1\n    max_total     = 1\n    queue_timeout = \"1s\"\n  }\n}\n")
	d := startDaemon(t, s)
	sandboxOrSkip(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	long := sbxCmd(ctx, s, "exec", "-c", "import time\nprint('running', flush=True)\ntime.sleep(50)")
	stdout, err := long.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(stdout).ReadString('\n'); l != "running\n" {
		t.Fatalf("long program: %q (%v)", l, err)
	}

	_, errOut, code := ctl(t, s, "exec", "-c", "print(1)")
	if code != 1 || !strings.Contains(errOut, "waited 1s: sandbox pool is full: 1 of 1 sandboxes are busy") || !strings.Contains(errOut, "max_total") ||
		strings.Contains(errOut, "rpc error") || strings.HasSuffix(strings.TrimSpace(errOut), "resource exhausted") {
		t.Fatalf("second exec while the pool is full: exit %d, stderr %s", code, errOut)
	}
	_, errOut, code = ctl(t, s, "exec", "--tenant", "other", "-c", "print(1)")
	if code != 1 || !strings.Contains(errOut, "pool is full") {
		t.Fatalf("another tenant while the pool is full: exit %d, stderr %s", code, errOut)
	}

	// Interrupting the client stops the program and frees the sandbox.
	if err := long.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := long.Wait(); err == nil {
		t.Error("interrupted exec exited 0")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, errOut, code := ctl(t, s, "exec", "-c", "print(1+1)")
		if code == 0 && out == "2\n" {
			break
		}
		if !strings.Contains(errOut, "pool is full") || time.Now().After(deadline) {
			t.Fatalf("exec after the long program ended: exit %d, stderr %s", code, errOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	daemonServes(t, s, d)
}

// TestBenchExec runs the measurement command briefly, so the figures it
// reports come from a command that works: every execution checked, warm
// and paced ones warm and fresh ones cold.
func TestBenchExec(t *testing.T) {
	s := newSetup(t)
	startDaemon(t, s)
	sandboxOrSkip(t, s)
	out, errOut, code := ctl(t, s, "bench", "exec", "--n", "20", "--cold", "3", "--paced", "2", "--pace", "1.2s", "--concurrency", "4", "--json")
	if code != 0 {
		t.Fatalf("bench exec: exit %d\n%s\n%s", code, out, errOut)
	}
	var r struct {
		Warm, Cold, Paced struct {
			N    int     `json:"n"`
			P50  float64 `json:"p50_ms"`
			P90  float64 `json:"p90_ms"`
			P99  float64 `json:"p99_ms"`
			Warm int     `json:"warm"`
		}
		Throughput float64 `json:"throughput_per_s"`
		IdleRSS    struct {
			N   int     `json:"n"`
			P50 float64 `json:"p50_mib"`
		} `json:"idle_sandbox_rss"`
		Pool struct {
			Target int `json:"target"`
		} `json:"pool"`
		CPU struct {
			Cexecd float64 `json:"cexecd"`
			All    float64 `json:"all"`
		} `json:"cpu_per_exec_ms"`
		PaceS    float64 `json:"pace_s"`
		Failures int     `json:"failures"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Failures != 0 || r.Warm.N != 20 || r.Cold.N != 3 || r.Cold.Warm != 0 || r.Paced.N != 2 || r.Paced.Warm != 2 || r.PaceS != 1.2 || r.Throughput <= 0 ||
		!(r.Warm.P50 > 0 && r.Warm.P50 <= r.Warm.P90 && r.Warm.P90 <= r.Warm.P99) || r.IdleRSS.N == 0 || r.IdleRSS.P50 <= 0 {
		t.Fatalf("bench exec result:\n%s", out)
	}
	// Every process of the daemon is counted in all, cexecd's own CPU too.
	if r.CPU.All <= 0 || r.CPU.All < r.CPU.Cexecd {
		t.Errorf("cpu_per_exec_ms: all %.3f, cexecd %.3f", r.CPU.All, r.CPU.Cexecd)
	}
	// Concurrency 4 leaves the tenant with at least 4 warm sandboxes.
	if r.Pool.Target < 4 {
		t.Errorf("pool target after concurrency 4: %d", r.Pool.Target)
	}
	t.Logf("warm p50 %.1f ms (%d/%d warm), cold p50 %.1f ms, %.0f/s, idle rss %.1f MiB", r.Warm.P50, r.Warm.Warm, r.Warm.N, r.Cold.P50, r.Throughput, r.IdleRSS.P50)

	// In persistent interpreters, one session per client.
	out, errOut, code = ctl(t, s, "bench", "exec", "--persistent", "--n", "20", "--cold", "0", "--concurrency", "4", "--json")
	var p struct {
		Persistent bool `json:"persistent"`
		Warm       struct {
			N int `json:"n"`
		}
		Failures int `json:"failures"`
	}
	if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil || !p.Persistent || p.Failures != 0 || p.Warm.N != 20 {
		t.Fatalf("bench exec --persistent: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--persistent", "--new-sessions"}, "--persistent and --new-sessions exclude each other"},
		{[]string{"--paced", "2", "--pace", "0s"}, "--pace must be more than 0, got 0s"},
		{[]string{"--paced", "-1"}, "--cold, --paced and --warmup at least 0"},
	} {
		if _, errOut, code := ctl(t, s, append([]string{"bench", "exec"}, tt.args...)...); code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("bench exec %v: exit %d, %s; want %q", tt.args, code, errOut, tt.want)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
