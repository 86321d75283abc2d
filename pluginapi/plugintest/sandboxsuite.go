package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// RunSandboxConformance checks, as subtests, what cexecd relies on from
// every sandbox backend: create, exec with output and a tool call, the
// timeout killing the program's whole process tree, the output cap, the
// memory limit, destroy, a program that dies mid-execution, requests
// every backend refuses, and for a backend with HostMounts, host calls on a
// mounted socket. newBackend
// returns a configured backend that is available on this machine (skip the
// test before calling this where it is not) and closes it when its test
// ends; the suite serves it over in-process gRPC, with opts (such as
// Multiplexed), and drives it through the host's client adapter.
//
// The backend runs programs with the standard runtime, so that the
// programs here can import cexec. Leftover processes are looked for in
// this machine's /proc, which shows those of backends whose sandboxes share
// its kernel.
func RunSandboxConformance(t *testing.T, newBackend func(t *testing.T) sandbox.Sandbox, opts ...Option) {
	sb := Sandbox(t, newBackend(t), opts...)
	CheckInfo(t, sb, pluginapi.KindSandbox)
	caps, err := sb.Capabilities(t.Context())
	if err != nil {
		t.Fatalf("capabilities: %v", err)
	}
	if !caps.Available {
		t.Fatalf("the backend is not available here (%s): skip before running the conformance suite", caps.UnavailableReason)
	}
	s := &sandboxSuite{sb: sb, caps: caps}
	t.Run("Create", s.create)
	t.Run("RequestsRefused", s.requestsRefused)
	t.Run("ExecOutputAndToolCall", s.execOutputAndToolCall)
	t.Run("TimeoutKillsProcessTree", s.timeoutKillsTree)
	t.Run("OutputCap", s.outputCap)
	t.Run("MemoryLimit", s.memoryLimit)
	t.Run("Destroy", s.destroy)
	t.Run("CrashMidExec", s.crashMidExec)
	t.Run("HostSocket", s.hostSocket)
}

type sandboxSuite struct {
	sb   sandbox.Sandbox
	caps sandbox.Capabilities
	seq  atomic.Int64
}

// execTimeout bounds one Exec of the suite, well above any limit it sets.
const execTimeout = 60 * time.Second

// newBox creates a sandbox with lim and destroys it when t ends.
func (s *sandboxSuite) newBox(t *testing.T, lim sandbox.Limits) string {
	t.Helper()
	id := fmt.Sprintf("conformance-%d-%d", os.Getpid(), s.seq.Add(1))
	ctx, cancel := context.WithTimeout(t.Context(), execTimeout)
	defer cancel()
	if _, err := s.sb.Create(ctx, sandbox.CreateRequest{ID: id, Tenant: "tenant-conformance", Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}, Limits: lim}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	t.Cleanup(func() {
		if err := s.sb.Destroy(context.Background(), id); err != nil && !errors.Is(err, pluginapi.ErrNotFound) {
			t.Errorf("destroy %s: %v", id, err)
		}
	})
	return id
}

// exec runs code in sandbox id and returns the result and the host.
func (s *sandboxSuite) exec(t *testing.T, id, code string, h *Host) (sandbox.ExecResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), execTimeout)
	defer cancel()
	return s.sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code}, h)
}

// mustRun runs code and fails t unless it ran without error.
func (s *sandboxSuite) mustRun(t *testing.T, id, code string) *Host {
	t.Helper()
	h := &Host{}
	res, err := s.exec(t, id, code, h)
	if err != nil || res.Error != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: %v, result %+v, error %+v, stderr %q", code, err, res, res.Error, h.Stderr())
	}
	return h
}

func (s *sandboxSuite) create(t *testing.T) {
	id := s.newBox(t, sandbox.Limits{})
	list, err := s.sb.List(t.Context())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	found := false
	for _, st := range list {
		if st.ID == id {
			found = true
			if st.Tenant != "tenant-conformance" {
				t.Errorf("list reports tenant %q, want tenant-conformance", st.Tenant)
			}
		}
	}
	if !found {
		t.Errorf("list %+v does not report %s", list, id)
	}
	_, err = s.sb.Create(t.Context(), sandbox.CreateRequest{ID: id, Tenant: "tenant-conformance"})
	if !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("create with an id in use = %v, want ErrInvalidArgument", err)
	}
	if err := s.sb.Health(t.Context(), id); err != nil && !errors.Is(err, pluginapi.ErrUnimplemented) {
		t.Errorf("health of a new sandbox: %v", err)
	}
}

func (s *sandboxSuite) execOutputAndToolCall(t *testing.T) {
	id := s.newBox(t, sandbox.Limits{})
	h := &Host{OnCall: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Server, Tool string
			Arguments    map[string]any
		}
		if err := json.Unmarshal(params, &p); err != nil || method != "call_tool" || p.Server != "files" || p.Tool != "read" || p.Arguments["path"] != "a.txt" {
			return nil, &sandbox.CallError{Type: "ToolError", Message: fmt.Sprintf("unexpected call %s %s", method, params)}
		}
		return json.RawMessage(`{"text":"contents of a.txt"}`), nil
	}}
	res, err := s.exec(t, id, `import cexec
print("hello from the sandbox")
r = cexec.call_tool("files", "read", {"path": "a.txt"})
print("the tool said", r["text"])
cexec.result({"ok": True})
`, h)
	if err != nil || res.Error != nil || res.ExitCode != 0 || !res.SandboxOK {
		t.Fatalf("exec: %v, result %+v, error %+v, stderr %q", err, res, res.Error, h.Stderr())
	}
	if out := h.Stdout(); out != "hello from the sandbox\nthe tool said contents of a.txt\n" {
		t.Errorf("stdout %q", out)
	}
	if calls := h.Calls(); len(calls) != 1 || calls[0].Method != "call_tool" {
		t.Errorf("host calls %+v, want one call_tool", calls)
	}
	if string(res.Result) != `{"ok":true}` {
		t.Errorf("result %s, want {\"ok\":true}", res.Result)
	}
}

func (s *sandboxSuite) timeoutKillsTree(t *testing.T) {
	id := s.newBox(t, sandbox.Limits{})
	token := fmt.Sprintf("cexec-conformance-sleeper-%d-%d", os.Getpid(), time.Now().UnixNano())
	code := fmt.Sprintf(`import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # %s"])
print("spawned", flush=True)
time.sleep(300)
`, token)
	h := &Host{}
	ctx, cancel := context.WithTimeout(t.Context(), execTimeout)
	defer cancel()
	res, err := s.sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code, Timeout: 2 * time.Second}, h)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if !res.TimedOut || res.Error == nil || res.Error.Type != "Timeout" {
		t.Errorf("result %+v (error %+v), want a Timeout", res, res.Error)
	}
	if !strings.Contains(h.Stdout(), "spawned") {
		t.Fatalf("the program never spawned its child: stdout %q, stderr %q", h.Stdout(), h.Stderr())
	}
	if pids := waitGone(token, 10*time.Second); len(pids) > 0 {
		t.Errorf("processes %v of the timed-out program are still running", pids)
	}
}

func (s *sandboxSuite) outputCap(t *testing.T) {
	const limit = 4096
	id := s.newBox(t, sandbox.Limits{OutputBytes: limit})
	h := &Host{}
	res, err := s.exec(t, id, `for i in range(2000):
    print("x" * 99)
`, h)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if !res.OutputTruncated {
		t.Errorf("result %+v, want OutputTruncated", res)
	}
	if n := len(h.Stdout()) + len(h.Stderr()); n > limit {
		t.Errorf("%d bytes of output reached the host; the cap is %d", n, limit)
	}
}

func (s *sandboxSuite) memoryLimit(t *testing.T) {
	id := s.newBox(t, sandbox.Limits{MemoryBytes: 256 << 20})
	h := &Host{}
	// Four times the limit, every byte written, so that no lazy
	// allocation hides it.
	res, err := s.exec(t, id, `try:
    b = b"x" * (1 << 30)
    print("allocated", len(b))
except MemoryError:
    print("MemoryError")
`, h)
	switch {
	case strings.Contains(h.Stdout(), "allocated"):
		t.Errorf("the program allocated four times its memory limit: result %+v", res)
	case strings.Contains(h.Stdout(), "MemoryError"):
	case err != nil:
		t.Logf("the execution was killed: %v", err)
	case res.Error != nil && res.Error.Message != "":
		t.Logf("the execution failed: %s: %s", res.Error.Type, res.Error.Message)
	default:
		t.Errorf("result %+v, stdout %q: neither a MemoryError nor a clear failure", res, h.Stdout())
	}
}

func (s *sandboxSuite) destroy(t *testing.T) {
	id := s.newBox(t, sandbox.Limits{})
	s.mustRun(t, id, `print("alive")`)
	if err := s.sb.Destroy(t.Context(), id); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := s.exec(t, id, `print("still here")`, &Host{}); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("exec after destroy = %v, want ErrNotFound", err)
	}
	if err := s.sb.Destroy(t.Context(), id); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("second destroy = %v, want ErrNotFound", err)
	}
	list, err := s.sb.List(t.Context())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, st := range list {
		if st.ID == id {
			t.Errorf("list still reports %s: %+v", id, st)
		}
	}
}

func (s *sandboxSuite) crashMidExec(t *testing.T) {
	id := s.newBox(t, sandbox.Limits{})
	h := &Host{}
	res, err := s.exec(t, id, `import os, signal
print("before the crash", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
print("after the crash")
`, h)
	if err == nil && (res.Error == nil || res.Error.Message == "") {
		t.Errorf("result %+v: a program killed mid-execution must come back as an error", res)
	}
	if out := h.Stdout(); !strings.Contains(out, "before the crash") || strings.Contains(out, "after the crash") {
		t.Errorf("stdout %q", out)
	}
	if err == nil && res.SandboxOK {
		s.mustRun(t, id, `print("the sandbox survived")`)
	}
	// The plugin stays usable whatever became of that sandbox.
	if out := s.mustRun(t, s.newBox(t, sandbox.Limits{}), `print("fine")`).Stdout(); out != "fine\n" {
		t.Errorf("a new sandbox after the crash printed %q", out)
	}
}

// requestsRefused checks the requests no backend may accept: ids that are
// not plain names, relative mount sources, environment names with "=",
// network where Capabilities says there is none, and sandboxes that do not
// exist.
func (s *sandboxSuite) requestsRefused(t *testing.T) {
	invalid := []struct {
		name string
		req  sandbox.CreateRequest
	}{
		{"bad id", sandbox.CreateRequest{ID: "../x"}},
		{"relative mount source", sandbox.CreateRequest{ID: "refused-m", Mounts: []sandbox.Mount{{Source: "ws", Target: "/workspace"}}}},
		{"bad env", sandbox.CreateRequest{ID: "refused-e", Env: map[string]string{"A=B": "c"}}},
	}
	if !s.caps.Network {
		invalid = append(invalid, struct {
			name string
			req  sandbox.CreateRequest
		}{"network not allowed", sandbox.CreateRequest{ID: "refused-n", Network: true}})
	}
	for _, tc := range invalid {
		if _, err := s.sb.Create(t.Context(), tc.req); !errors.Is(err, pluginapi.ErrInvalidArgument) {
			t.Errorf("%s: create = %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if _, err := s.exec(t, "missing", `print(1)`, &Host{}); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("exec in a missing sandbox = %v, want ErrNotFound", err)
	}
	if err := s.sb.Destroy(t.Context(), "missing"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("destroy of a missing sandbox = %v, want ErrNotFound", err)
	}
}
