package msb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// python is the interpreter the fakes run the runtime with.
const python = "/usr/bin/python3"

// fakeMSB is the fake msb binary, built once by TestMain.
var fakeMSB string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cexec-fakemsb-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeMSB = filepath.Join(dir, "msb")
	if err := testutil.GoBuild(fakeMSB, "./plugins/sandbox-microsandbox/internal/fakemsb"); err != nil {
		fmt.Fprintln(os.Stderr, "build the fake msb:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// fakeHost prepares a machine the fake msb believes can boot microVMs
// (a CPU with vmx, a usable /dev/kvm) and returns MSB_HOME.
func fakeHost(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		testutil.SkipMissing(t, "no %s to run the runtime with", python)
	}
	dir := t.TempDir()
	cpuinfo := filepath.Join(dir, "cpuinfo")
	kvm := filepath.Join(dir, "kvm")
	must(t, os.WriteFile(cpuinfo, []byte("processor\t: 0\nflags\t\t: fpu vme de pse vmx sse\n"), 0o644))
	must(t, os.WriteFile(kvm, nil, 0o600))
	t.Setenv("FAKEMSB_CPUINFO", cpuinfo)
	t.Setenv("FAKEMSB_KVM", kvm)
	home := filepath.Join(dir, "msb-home")
	must(t, os.MkdirAll(home, 0o755))
	return home
}

// fakeConfig is the plugin's CLI mode configuration for the fake msb.
func fakeConfig(home string, extra map[string]any) json.RawMessage {
	c := map[string]any{"msb": fakeMSB, "msb_home": home, "python": python, "exec_timeout": "20s"}
	for k, v := range extra {
		c[k] = v
	}
	b, _ := json.Marshal(c)
	return b
}

// configured returns a configured plugin and, served over in-process gRPC
// as cexecd sees it, its client; it fails when the configuration has
// errors.
func configured(t *testing.T, config json.RawMessage) (*Plugin, sandbox.Sandbox) {
	t.Helper()
	impl := New(nil)
	t.Cleanup(func() { _ = impl.Close() })
	sb := plugintest.Sandbox(t, impl)
	plugintest.CheckInfo(t, sb, pluginapi.KindSandbox)
	diags, err := sb.Configure(t.Context(), config, sandbox.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}
	return impl, sb
}

var seq atomic.Int64

// newID returns a fresh sandbox id.
func newID() string { return fmt.Sprintf("t%d", seq.Add(1)) }

// create makes a sandbox with a fresh workspace and returns its id and the
// workspace's host path; the sandbox is destroyed at the end of the test.
func create(t *testing.T, sb sandbox.Sandbox, lim sandbox.Limits, mounts ...sandbox.Mount) (string, string) {
	t.Helper()
	ws := t.TempDir()
	id := newID()
	mounts = append([]sandbox.Mount{{Source: ws, Target: "/workspace"}}, mounts...)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := sb.Create(ctx, sandbox.CreateRequest{ID: id, Tenant: "tenant-a", Mounts: mounts, Limits: lim, Env: map[string]string{"CEXEC_TEST": "yes"}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background(), id); err != nil && !errors.Is(err, pluginapi.ErrNotFound) {
			t.Errorf("destroy %s: %v", id, err)
		}
	})
	return id, ws
}

func run(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest, h *plugintest.Host) sandbox.ExecResult {
	t.Helper()
	if h == nil {
		h = &plugintest.Host{}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, req, h)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return res
}

// stubTree writes a servers tree with one tool stub and a shared skills
// tree, both world-readable, and returns their paths.
func stubTree(t *testing.T) (string, string) {
	t.Helper()
	servers := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(servers, "filesystem"), 0o755))
	must(t, os.WriteFile(filepath.Join(servers, "filesystem", "__init__.py"), []byte(
		"from cexec import call_tool\n\ndef read_text_file(*, path: str) -> str:\n    return call_tool('filesystem', 'read_text_file', {'path': path})\n"), 0o644))
	skills := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(skills, "csv_report"), 0o755))
	must(t, os.WriteFile(filepath.Join(skills, "csv_report", "__init__.py"), []byte("def run():\n    return 'shared skill'\n"), 0o644))
	return servers, skills
}

// toolHost answers read_text_file and fails every other tool.
func toolHost() *plugintest.Host {
	return &plugintest.Host{OnCall: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Server, Tool string
			Arguments    map[string]any
		}
		_ = json.Unmarshal(params, &p)
		if method != "call_tool" || p.Tool != "read_text_file" {
			return nil, &sandbox.CallError{Type: "ToolError", Message: "tool " + p.Tool + " not found"}
		}
		return json.Marshal("contents of " + fmt.Sprint(p.Arguments["path"]))
	}}
}

// execCase is one program and what it must produce.
type execCase struct {
	name, code, stdout, result, errType string
	exit                                int
}

// commonCases are programs every backend runs alike.
var commonCases = []execCase{
	{name: "print", code: "print(1+1)", stdout: "2\n"},
	{name: "result", code: "import cexec\ncexec.result({'rows': 3})", result: `{"rows":3}`},
	{name: "exception", code: "def f():\n    raise RuntimeError('bad')\nf()", exit: 1, errType: "RuntimeError"},
	{name: "blank lines in blocks", code: "def f():\n    x = 1\n\n    return x + 1\n\nprint(f())", stdout: "2\n"},
	{name: "skills", code: "from skills.csv_report import run\nprint(run())", stdout: "shared skill\n"},
	{name: "workspace writable", code: "open('out.txt', 'w').write('hi')\nprint(open('out.txt').read())", stdout: "hi\n"},
	{name: "environment", code: "import os\nprint(os.environ.get('CEXEC_TEST'))", stdout: "yes\n"},
}

// callCases need call_tool.
var callCases = []execCase{
	{name: "call_tool", code: "from servers.filesystem import read_text_file\nprint(read_text_file(path='/a.txt'))", stdout: "contents of /a.txt\n"},
	{name: "tool error", code: "from cexec import call_tool, ToolError\ntry:\n    call_tool('filesystem', 'nope', {})\nexcept ToolError as e:\n    print(e)", stdout: "tool nope not found\n"},
}

// checkCases runs cases in sandbox id.
// checkFreshGlobals runs two persistent executions with fresh globals in
// one session: neither sees what the other set.
func checkFreshGlobals(t *testing.T, sb sandbox.Sandbox, id string) {
	t.Helper()
	for i := range 2 {
		h := &plugintest.Host{}
		run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "print('m' in globals())\nm = 1", Persistent: true, FreshGlobals: true, Session: "f"}, h)
		if h.Stdout() != "False\n" {
			t.Fatalf("run %d with fresh globals: %q", i, h.Stdout())
		}
	}
}

func checkCases(t *testing.T, sb sandbox.Sandbox, id string, cases []execCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := toolHost()
			res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: tc.code}, h)
			if res.ExitCode != tc.exit || h.Stdout() != tc.stdout || string(res.Result) != tc.result {
				t.Errorf("exit %d stdout %q result %s, want %d %q %s (error %+v, stderr %q)", res.ExitCode, h.Stdout(), res.Result, tc.exit, tc.stdout, tc.result, res.Error, h.Stderr())
			}
			if (res.Error == nil) != (tc.errType == "") || res.Error != nil && res.Error.Type != tc.errType {
				t.Errorf("error %+v, want type %q", res.Error, tc.errType)
			}
			if tc.errType != "" && !containsAll(res.Error.Traceback, "in f", "RuntimeError: bad") {
				t.Errorf("traceback %q", res.Error.Traceback)
			}
			if !res.SandboxOK {
				t.Errorf("sandbox not OK")
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startedHost is a Host that closes started when the program first
// writes to stdout, for tests that act on a running program.
type startedHost struct {
	plugintest.Host
	once    sync.Once
	started chan struct{}
}

func newStartedHost() *startedHost { return &startedHost{started: make(chan struct{})} }

func (h *startedHost) Output(s sandbox.Stream, data []byte) error {
	err := h.Host.Output(s, data)
	if s == sandbox.Stdout {
		h.once.Do(func() { close(h.started) })
	}
	return err
}
