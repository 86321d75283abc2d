package bwrap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/plugins/sandbox-bwrap/internal/bwrap"
)

// backend serves a fresh plugin over in-process gRPC, as cexecd sees it,
// and skips the test where bubblewrap cannot run.
func backend(t *testing.T, config string) sandbox.Sandbox {
	t.Helper()
	impl := bwrap.New(nil)
	t.Cleanup(func() { _ = impl.Close() })
	sb := plugintest.Sandbox(t, impl)
	plugintest.CheckInfo(t, sb, pluginapi.KindSandbox)
	diags, err := sb.Configure(t.Context(), json.RawMessage(config), sandbox.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}
	caps, err := sb.Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !caps.Available {
		testutil.SkipMissing(t, "bubblewrap sandboxes are not available here: %s", caps.UnavailableReason)
	}
	return sb
}

var seq atomic.Int64

// box creates a sandbox with a fresh workspace and returns its id and the
// workspace's host path.
func box(t *testing.T, sb sandbox.Sandbox, lim sandbox.Limits, mounts ...sandbox.Mount) (string, string) {
	t.Helper()
	ws := t.TempDir()
	id := fmt.Sprintf("t%d-%d", os.Getpid(), seq.Add(1))
	mounts = append([]sandbox.Mount{{Source: ws, Target: "/workspace"}}, mounts...)
	if _, err := sb.Create(t.Context(), sandbox.CreateRequest{ID: id, Tenant: "tenant-a", Mounts: mounts, Limits: lim}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background(), id); err != nil && !errors.Is(err, pluginapi.ErrNotFound) {
			t.Errorf("destroy %s: %v", id, err)
		}
	})
	return id, ws
}

func run(t *testing.T, sb sandbox.Sandbox, id, code string, h *plugintest.Host) sandbox.ExecResult {
	t.Helper()
	if h == nil {
		h = &plugintest.Host{}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code}, h)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return res
}

// stillServing checks that the backend creates and runs sandboxes after an
// attack.
func stillServing(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	id, _ := box(t, sb, sandbox.Limits{})
	h := &plugintest.Host{}
	if res := run(t, sb, id, "print(6*7)", h); res.ExitCode != 0 || h.Stdout() != "42\n" || !res.SandboxOK {
		t.Fatalf("backend stopped serving: %+v stdout %q stderr %q", res, h.Stdout(), h.Stderr())
	}
	if err := sb.Destroy(t.Context(), id); err != nil {
		t.Fatal(err)
	}
}

func TestHappyPaths(t *testing.T) {
	sb := backend(t, `{}`)
	servers := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(servers, "filesystem"), 0o755))
	must(t, os.WriteFile(filepath.Join(servers, "filesystem", "__init__.py"), []byte(
		"from cexec import call_tool\n\ndef read_text_file(*, path: str) -> str:\n    return call_tool('filesystem', 'read_text_file', {'path': path})\n"), 0o644))
	must(t, os.Chmod(servers, 0o755))
	shared := t.TempDir()
	must(t, os.Chmod(shared, 0o755))
	must(t, os.MkdirAll(filepath.Join(shared, "csv_report"), 0o755))
	must(t, os.WriteFile(filepath.Join(shared, "csv_report", "__init__.py"), []byte("def run():\n    return 'shared skill'\n"), 0o644))
	id, ws := box(t, sb, sandbox.Limits{},
		sandbox.Mount{Source: servers, Target: "/cexec/servers", ReadOnly: true},
		sandbox.Mount{Source: shared, Target: "/cexec/skills", ReadOnly: true})
	must(t, os.MkdirAll(filepath.Join(ws, "skills", "mine"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "skills", "mine", "__init__.py"), []byte("def run():\n    return 'own skill'\n"), 0o644))

	echo := func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Server, Tool string
			Arguments    map[string]any
		}
		_ = json.Unmarshal(params, &p)
		if p.Tool != "read_text_file" {
			return nil, &sandbox.CallError{Type: "ToolError", Message: "tool " + p.Tool + " not found"}
		}
		return json.Marshal("contents of " + p.Arguments["path"].(string))
	}
	tests := []struct {
		name, code, stdout, result, errType string
		exit                                int
	}{
		{name: "print", code: "print(1+1)", stdout: "2\n"},
		{name: "result", code: "import cexec\ncexec.result({'rows': 3})", result: `{"rows":3}`},
		{name: "exception", code: "def f():\n    raise RuntimeError('bad')\nf()", exit: 1, errType: "RuntimeError"},
		{name: "call_tool", code: "from servers.filesystem import read_text_file\nprint(read_text_file(path='/a.txt'))", stdout: "contents of /a.txt\n"},
		{name: "tool not found", code: "from cexec import call_tool, ToolError\ntry:\n    call_tool('filesystem', 'nope', {})\nexcept ToolError as e:\n    print(e)", stdout: "tool nope not found\n"},
		{name: "skills", code: "from skills.csv_report import run as a\nfrom skills.mine import run as b\nprint(a(), b())", stdout: "shared skill own skill\n"},
		{name: "identity", code: "import os\nst = open('/proc/self/status').read()\nprint(os.getuid(), os.getgid(), os.getcwd(), 'CapEff:\\t0000000000000000' in st, 'NoNewPrivs:\\t1' in st, 'Seccomp:\\t2' in st)",
			stdout: "65534 65534 /workspace True True True\n"},
		{name: "workspace writable", code: "open('out.txt', 'w').write('hi')\nprint(open('/workspace/out.txt').read())", stdout: "hi\n"},
		{name: "subprocess python", code: "import subprocess\nsubprocess.run(['python3', '-c', 'import cexec, servers.filesystem; print(\"sub ok\")'], check=True)", stdout: "sub ok\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &plugintest.Host{OnCall: echo}
			res := run(t, sb, id, tc.code, h)
			if res.ExitCode != tc.exit || h.Stdout() != tc.stdout || string(res.Result) != tc.result {
				t.Errorf("exit %d stdout %q result %s, want %d %q %s (error %+v, stderr %q)", res.ExitCode, h.Stdout(), res.Result, tc.exit, tc.stdout, tc.result, res.Error, h.Stderr())
			}
			if (res.Error == nil) != (tc.errType == "") || res.Error != nil && res.Error.Type != tc.errType {
				t.Errorf("error %+v, want type %q", res.Error, tc.errType)
			}
			if tc.errType != "" && !strings.Contains(res.Error.Traceback, "in f") {
				t.Errorf("traceback %q", res.Error.Traceback)
			}
			if !res.SandboxOK {
				t.Errorf("sandbox not OK")
			}
		})
	}
	if got, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(got) != "hi" {
		t.Errorf("workspace file on the host: %q %v", got, err)
	}

	t.Run("persistent", func(t *testing.T) {
		for i, want := range []string{"1\n", "2\n", "3\n"} {
			h := &plugintest.Host{}
			code := "n = globals().get('n', 0) + 1\nprint(n)"
			res, err := sb.Exec(t.Context(), sandbox.ExecRequest{SandboxID: id, Code: code, Persistent: true, Session: "s"}, h)
			if err != nil || h.Stdout() != want {
				t.Fatalf("run %d: %q %+v %v", i, h.Stdout(), res, err)
			}
		}
	})

	t.Run("list and health", func(t *testing.T) {
		list, err := sb.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var st *sandbox.Status
		for i := range list {
			if list[i].ID == id {
				st = &list[i]
			}
		}
		if st == nil || st.Tenant != "tenant-a" || st.Executions < int64(len(tests)) || st.RSSBytes < 1<<20 || st.State != "ready" {
			t.Errorf("status %+v", st)
		}
		if err := sb.Health(t.Context(), id); err != nil {
			t.Errorf("health: %v", err)
		}
		if err := sb.Health(t.Context(), "nope"); !errors.Is(err, pluginapi.ErrNotFound) {
			t.Errorf("health of unknown sandbox: %v", err)
		}
	})
}

// TestRequestsRefused checks what bwrap refuses beyond the conformance
// suite's requests: mounts over the system, the runtime, or through "..".
func TestRequestsRefused(t *testing.T) {
	sb := backend(t, `{}`)
	ws := t.TempDir()
	tests := []struct {
		name string
		req  sandbox.CreateRequest
	}{
		{"mount over /usr", sandbox.CreateRequest{ID: "m1", Mounts: []sandbox.Mount{{Source: ws, Target: "/usr/lib"}}}},
		{"mount over the runtime", sandbox.CreateRequest{ID: "m2", Mounts: []sandbox.Mount{{Source: ws, Target: "/cexec/lib"}}}},
		{"unclean target", sandbox.CreateRequest{ID: "m4", Mounts: []sandbox.Mount{{Source: ws, Target: "/workspace/../etc"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sb.Create(t.Context(), tc.req); !errors.Is(err, pluginapi.ErrInvalidArgument) {
				t.Errorf("create: %v", err)
			}
		})
	}
}

// TestEscapes runs each attack in its own sandbox and checks that it was
// blocked or contained, then that the backend still serves.
// It is long because it is one table of attacks, read as the threat model
// it checks; the running of the cases is the few lines at its end.
func TestEscapes(t *testing.T) {
	const secretEnv = "CEXEC_TEST_DAEMON_SECRET"
	secret := fmt.Sprintf("s3cr3t-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Setenv(secretEnv, secret)
	sb := backend(t, `{}`)

	hostSecretFile := filepath.Join(t.TempDir(), "secret.txt")
	must(t, os.WriteFile(hostSecretFile, []byte(secret), 0o644))
	otherTenant := filepath.Join(t.TempDir(), "tenants", "b", "workspace")
	must(t, os.MkdirAll(otherTenant, 0o755))
	must(t, os.WriteFile(filepath.Join(otherTenant, "notes.txt"), []byte(secret), 0o644))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name  string
		lim   sandbox.Limits
		setup func(t *testing.T, ws string)
		code  string
		// check inspects the outcome; stdout never contains the secret.
		check func(t *testing.T, res sandbox.ExecResult, stdout string)
		// after, when set, runs next in the same sandbox and must print
		// afterOut: the attack left nothing behind.
		after, afterOut string
	}{
		{name: "read /etc/shadow and /root", code: tryAll(`open('/etc/shadow').read()`, `os.listdir('/root')`, `open('/root/.bashrc').read()`),
			check: wantLines("FileNotFoundError", "FileNotFoundError", "FileNotFoundError")},
		{name: "write outside /workspace", code: tryAll(`open('/etc/evil', 'w')`, `open('/usr/evil', 'w')`, `open('/evil', 'w')`,
			`open('/cexec/lib/evil', 'w')`,
			// The zygote's count of kills at the memory limit.
			`open('/cexec/memory.events', 'w').write('oom_kill 99')`,
			// Writing a sysctl's current value back and chmod to the current
			// mode are harmless if they ever succeed, and must not.
			`open('/proc/sys/fs/file-max', 'w').write(open('/proc/sys/fs/file-max').read())`,
			`os.chmod('/dev/null', os.stat('/dev/null').st_mode & 0o7777)`,
			// Sandboxes see a copy of /etc without what only root may read.
			`os.listdir('/etc/ssl/private')`),
			check: wantLines("OSError 30", "OSError 30", "OSError 30", "OSError 30", "OSError 30", "PermissionError", "PermissionError", "FileNotFoundError")},
		{name: "fill /tmp", lim: sandbox.Limits{TmpBytes: 8 << 20}, code: tryAll(`open('/tmp/big', 'wb').write(b'x' * (32 << 20))`),
			check: wantLines("OSError 28")},
		{name: "a file past max_file_size", lim: sandbox.Limits{FileBytes: 1 << 20}, code: tryAll(`open('/workspace/big', 'wb').write(b'x' * (4 << 20))`,
			`print(os.path.getsize('/workspace/big') <= 1 << 20)`),
			check: wantLines("OSError 27", "True", "ok")},
		{name: "symlinks to host paths", setup: func(t *testing.T, ws string) {
			must(t, os.Symlink("/etc/shadow", filepath.Join(ws, "shadow")))
			must(t, os.Symlink(hostSecretFile, filepath.Join(ws, "secret")))
			must(t, os.Symlink(filepath.Dir(hostSecretFile), filepath.Join(ws, "dir")))
		}, code: tryAll(`open('shadow').read()`, `open('secret').read()`, `os.listdir('dir')`),
			check: wantLines("FileNotFoundError", "FileNotFoundError", "FileNotFoundError")},
		{name: "another tenant's workspace", code: tryAll(
			fmt.Sprintf(`open(%q).read()`, filepath.Join(otherTenant, "notes.txt")),
			fmt.Sprintf(`os.listdir(%q)`, filepath.Dir(otherTenant)),
			fmt.Sprintf(`print(any(%q.encode() in open(os.path.join(r, f), 'rb').read() for d in ('/workspace', '/tmp', '/cexec') for r, _, fs in os.walk(d) for f in fs))`, secret)),
			check: wantLines("FileNotFoundError", "FileNotFoundError", "False", "ok")},
		{name: "connect to the host's loopback", code: tryAll(fmt.Sprintf(`socket.create_connection(('127.0.0.1', %d), timeout=2)`, port)),
			check: wantLines("PermissionError")},
		{name: "connect outside and resolve DNS", code: "import time\nt0 = time.monotonic()\n" + tryAll(
			`socket.create_connection(('1.1.1.1', 53), timeout=5)`,
			`socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('1.1.1.1', 53))`,
			`socket.socket(socket.AF_INET6, socket.SOCK_STREAM)`,
			`socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)`,
			`socket.getaddrinfo('example.com', 80)`) + "print(time.monotonic() - t0 < 1)",
			check: wantLines("PermissionError", "PermissionError", "PermissionError", "PermissionError", "gaierror", "True")},
		{name: "read the daemon's environment through /proc", code: "import os\n" +
			"pids = [p for p in os.listdir('/proc') if p.isdigit()]\n" +
			"seen = [open(f'/proc/{p}/environ', 'rb').read() for p in pids if os.access(f'/proc/{p}/environ', os.R_OK)]\n" +
			"print(len(pids) <= 3, any(b'" + secretEnv + "' in e for e in seen), '" + secretEnv + "' in os.environ)\n" +
			tryAll(`open('/proc/1/environ', 'rb').read()`, `open('/proc/1/mem', 'rb')`, `os.listdir('/proc/1/fd')`),
			check: wantLines("True False False", "PermissionError", "PermissionError", "PermissionError")},
		// The zygote did not need prctl (and _ctypes): executing an
		// interpreter the sandbox may not read made it non-dumpable.
		{name: "an execute-only interpreter", code: "import sys\nimported = '_ctypes' in sys.modules\nimport ctypes\n" +
			"print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), imported)\n" + tryAll(`open(sys.executable, 'rb')`, `open('/proc/self/exe', 'rb')`),
			check: wantLines("0 False", "PermissionError", "PermissionError")},
		{name: "ptrace, mount and namespaces", code: "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n" +
			"def errno(r):\n    return 'ok' if r == 0 else os.strerror(ctypes.get_errno())\n" +
			"print(errno(libc.ptrace(0, 0, 0, 0)))\n" +
			"print(errno(libc.ptrace(16, 1, 0, 0)))\n" +
			"print(errno(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)))\n" +
			"print(errno(libc.umount2(b'/tmp', 2)))\n" +
			"print(errno(libc.chroot(b'/tmp')))\n" +
			"print(errno(libc.unshare(0x10000000)))\n" +
			"print(errno(libc.unshare(0x00020000)))\n" +
			"print(errno(libc.setns(0, 0)))\n" +
			fmt.Sprintf("print(errno(libc.syscall(%d, 8, None)))\n", sysno(t, "io_uring_setup")) +
			fmt.Sprintf("print(errno(libc.syscall(%d, 0, None, 0)))\n", sysno(t, "bpf")) +
			fmt.Sprintf("print(errno(libc.syscall(%d, 0, 0, 0, 0, 0)))\n", sysno(t, "keyctl")) +
			fmt.Sprintf("print(errno(libc.syscall(%d, None, 0, 0, 0, 0)))\n", sysno(t, "perf_event_open")),
			check: wantLines(repeat("Operation not permitted", 12)...)},
		{name: "kill the parent", code: "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGTERM)\nos.kill(1, signal.SIGINT)\nprint('alive', os.getppid())",
			check: func(t *testing.T, res sandbox.ExecResult, stdout string) {
				if stdout != "alive 1\n" || !res.SandboxOK {
					t.Errorf("stdout %q result %+v", stdout, res)
				}
			}},
		{name: "escape the session", code: "import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 100'], start_new_session=True)\nprint('started')",
			check: func(t *testing.T, res sandbox.ExecResult, stdout string) {
				if stdout != "started\n" || !res.SandboxOK {
					t.Errorf("stdout %q result %+v", stdout, res)
				}
			}, after: processCount, afterOut: "2\n"},
		{name: "infinite loop", lim: sandbox.Limits{Timeout: 500 * time.Millisecond}, code: "while True:\n    pass",
			check: func(t *testing.T, res sandbox.ExecResult, _ string) {
				if !res.TimedOut || res.Error == nil || res.Error.Type != "Timeout" || res.SandboxOK {
					t.Errorf("result %+v", res)
				}
			}},
		{name: "1 GB of stdout", lim: sandbox.Limits{OutputBytes: 64 << 10}, code: "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)",
			check: func(t *testing.T, res sandbox.ExecResult, stdout string) {
				if !res.OutputTruncated || len(stdout) != 64<<10 || res.Error == nil || res.Error.Type != "OutputLimit" {
					t.Errorf("got %d bytes, result %+v", len(stdout), res)
				}
			}},
		{name: "memory bomb", lim: sandbox.Limits{MemoryBytes: 128 << 20, Timeout: 20 * time.Second}, code: "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))",
			check: func(t *testing.T, res sandbox.ExecResult, _ string) {
				// Python's own MemoryError (the address space limit), or the
				// cgroup's kill, which the plugin reports as one.
				if res.ExitCode == 0 || res.Error == nil || res.Error.Type != "MemoryError" || res.TimedOut {
					t.Fatalf("result %+v (error %+v)", res, res.Error)
				}
				if res.ExitCode == 137 && !strings.Contains(res.Error.Message, "memory limit of 128.0 MiB") {
					t.Errorf("a kill for memory says %q", res.Error.Message)
				}
			}},
		{name: "fork bomb", lim: sandbox.Limits{Pids: 64, Timeout: 3 * time.Second}, code: "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
			check: func(t *testing.T, res sandbox.ExecResult, _ string) {
				if !res.TimedOut || res.SandboxOK {
					t.Errorf("result %+v (error %+v)", res, res.Error)
				}
			}, after: processCount, afterOut: "2\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, ws := box(t, sb, tc.lim)
			if tc.setup != nil {
				tc.setup(t, ws)
			}
			h := &plugintest.Host{}
			res := run(t, sb, id, tc.code, h)
			out := h.Stdout()
			if strings.Contains(out+h.Stderr(), secret) {
				t.Errorf("the secret leaked into the sandbox's output")
			}
			tc.check(t, res, out)
			if res.Error != nil {
				t.Logf("contained: %s: %s", res.Error.Type, res.Error.Message)
			}
			if t.Failed() {
				t.Logf("stdout %q\nstderr %q\nresult %+v error %+v", out, h.Stderr(), res, res.Error)
			}
			if tc.after != "" {
				h := &plugintest.Host{}
				if res := run(t, sb, id, tc.after, h); h.Stdout() != tc.afterOut {
					t.Errorf("afterwards: stdout %q, want %q (%+v)", h.Stdout(), tc.afterOut, res)
				}
			}
			if err := sb.Destroy(t.Context(), id); err != nil {
				t.Errorf("destroy: %v", err)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's listener accepted %d connections from sandboxes", n)
	}
	stillServing(t, sb)
}

// processCount prints how many processes the sandbox has: 2 (the zygote
// and the program itself) when nothing was left behind.
const processCount = "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))"

// tryAll runs each Python expression and prints "ok" or the exception's
// class name (and errno for plain OSErrors), one line each.
func tryAll(exprs ...string) string {
	var b strings.Builder
	b.WriteString("import os, socket\n")
	for _, e := range exprs {
		fmt.Fprintf(&b, "try:\n    %s\n    print('ok')\nexcept OSError as e:\n    print(type(e).__name__ if type(e) is not OSError else f'OSError {e.errno}')\nexcept Exception as e:\n    print(type(e).__name__)\n", e)
	}
	return b.String()
}

func wantLines(lines ...string) func(t *testing.T, res sandbox.ExecResult, stdout string) {
	return func(t *testing.T, res sandbox.ExecResult, stdout string) {
		t.Helper()
		if want := strings.Join(lines, "\n") + "\n"; stdout != want {
			t.Errorf("stdout %q, want %q", stdout, want)
		}
		if res.ExitCode != 0 || res.Error != nil {
			t.Errorf("program failed: %+v %+v", res, res.Error)
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func sysno(t *testing.T, name string) int {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skip(err)
	}
	n, ok := info.SyscallNames[name]
	if !ok {
		t.Skipf("no %s on %s", name, info.Name)
	}
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCgroupNamespace checks that /proc/self/cgroup names no host cgroup:
// the sandbox's cgroup namespace is rooted at its own cgroup, so neither
// the plugin's cgroup nor the sandbox id (which names the tenant) shows.
func TestCgroupNamespace(t *testing.T) {
	sb := backend(t, `{}`)
	id, _ := box(t, sb, sandbox.Limits{})
	h := &plugintest.Host{}
	res := run(t, sb, id, "import subprocess\nprint(open('/proc/self/cgroup').read(), end='')\nsubprocess.run(['cat', '/proc/self/cgroup'], check=True)", h)
	out := h.Stdout()
	if res.ExitCode != 0 || out == "" {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, out, h.Stderr())
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasSuffix(line, ":/") {
			t.Errorf("/proc/self/cgroup line %q is not the namespace's root", line)
		}
	}
	if strings.Contains(out, id) || strings.Contains(out, "tenant-a") || strings.Contains(out, "cexec") {
		t.Errorf("/proc/self/cgroup names the host's layout:\n%s", out)
	}
}
