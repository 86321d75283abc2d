package hostchan

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/core/pluginhost/hosttest"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// bwrapBackend starts the real bwrap plugin binary through the plugin host,
// as cexecd does (a plugin's internal package is not importable from here),
// and puts srv in front of it.
func bwrapBackend(t testing.TB) (relay, direct sandbox.Sandbox, srv *Server) {
	t.Helper()
	host, _ := hosttest.Bwrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sb, err := host.Sandbox("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	caps, err := sb.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !caps.Available {
		testutil.SkipMissing(t, "bubblewrap sandboxes are not available here: %s", caps.UnavailableReason)
	}
	if !caps.HostMounts {
		t.Fatal("the bwrap backend does not declare HostMounts")
	}
	srv = newServer(t)
	return sb, Wrap(srv, sb), srv
}

func createBox(t testing.TB, sb sandbox.Sandbox, id string) {
	t.Helper()
	mounts := []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}
	if _, err := sb.Create(t.Context(), sandbox.CreateRequest{ID: id, Tenant: "t", Mounts: mounts}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background(), id) })
}

func execIn(t testing.TB, sb sandbox.Sandbox, id, code string, h *plugintest.Host) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code}, h)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %+v\nstdout %q\nstderr %q", res.ExitCode, res.Error, h.Stdout(), h.Stderr())
	}
	return res
}

// TestDirectCallsInSandbox makes host calls from real sandboxes: they take
// the socket, errors arrive as on the relayed path, and a persistent
// interpreter gets a new token each execution.
func TestDirectCallsInSandbox(t *testing.T) {
	_, sb, _ := bwrapBackend(t)
	createBox(t, sb, "sbx-direct")
	code := `
import cexec
from cexec import call_tool, HostError
r = call_tool("s", "t", {"x": 1})
print(r["method"], r["params"]["arguments"], cexec._direct is not None)
try:
    cexec._host_call("fail", None)
except HostError as e:
    print(type(e).__name__, e.type, e)
try:
    cexec._host_call("plain", None)
except HostError as e:
    print("HostError", e.type, e)
`
	want := "call_tool {'x': 1} True\nHostError ToolNotFound no such tool\nHostError HostError backend exploded\n"
	// The first execution forks its child, later ones take the zygote's
	// warm spare, given the time to fork it.
	for i := range 3 {
		h := echoHost()
		execIn(t, sb, "sbx-direct", code, h)
		if h.Stdout() != want {
			t.Errorf("execution %d: stdout %q, want %q", i, h.Stdout(), want)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for i := range 2 {
		ph := echoHost()
		res, err := sb.Exec(t.Context(), sandbox.ExecRequest{SandboxID: "sbx-direct", Persistent: true, Session: "s",
			Code: `import cexec; cexec.call_tool("s", "t"); print(cexec._direct is not None)`}, ph)
		if err != nil || res.ExitCode != 0 || ph.Stdout() != "True\n" {
			t.Fatalf("persistent execution %d: %v %+v stdout %q stderr %q", i, err, res, ph.Stdout(), ph.Stderr())
		}
	}
}

// TestSocketEscapes attacks the channel from inside a sandbox: another
// execution's token (running in another sandbox), an ended execution's
// token, another sandbox's socket and a protocol other than host calls
// all fail, and the host behind them answers nothing.
func TestSocketEscapes(t *testing.T) {
	_, sb, srv := bwrapBackend(t)
	createBox(t, sb, "sbx-a")
	createBox(t, sb, "sbx-b")

	// An execution in B hands out its token and keeps running.
	var mu sync.Mutex
	var tokB string
	leaked, release := make(chan struct{}), make(chan struct{})
	hostB := &plugintest.Host{OnCall: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "leak":
			mu.Lock()
			_ = json.Unmarshal(params, &tokB)
			mu.Unlock()
			close(leaked)
		case "wait":
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return json.RawMessage("null"), nil
	}}
	doneB := make(chan sandbox.ExecResult, 1)
	go func() {
		res, _ := sb.Exec(t.Context(), sandbox.ExecRequest{SandboxID: "sbx-b",
			Code: `import cexec; cexec._host_call("leak", cexec._host_token); cexec._host_call("wait", None)`}, hostB)
		doneB <- res
	}()
	select {
	case <-leaked:
	case <-time.After(60 * time.Second):
		t.Fatal("the execution in B did not start")
	}

	// An earlier execution in A, whose token is over.
	hostOld := &plugintest.Host{OnCall: func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage("null"), nil
	}}
	execIn(t, sb, "sbx-a", `import cexec; cexec._host_call("x", None); print(cexec._host_token)`, hostOld)
	tokOld := strings.TrimSpace(hostOld.Stdout())

	mu.Lock()
	stolen := tokB
	mu.Unlock()
	hostA := echoHost()
	code := fmt.Sprintf(`
import os, socket, json, struct

def attempt(token, first=None, path="/cexec/host.sock"):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        if first is None:
            hello = json.dumps({"op": "hello", "token": token}).encode()
            s.sendall(struct.pack(">IB", len(hello), 0x4A) + hello)
        else:
            s.sendall(first)
        s.settimeout(20)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return json.loads(data[5:]).get("op", "?") + ":" + json.loads(data[5:]).get("error", "")
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()

print("stolen", attempt(%q))
print("old", attempt(%q))
print("forged", attempt("00" * 32))
print("grpc", attempt("", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
print("other socket", attempt(%q, path=%q))
print("listing", sorted(os.listdir("/cexec")))
`, stolen, tokOld, stolen, filepath.Join(srv.Dir(), "x.sock"))
	execIn(t, sb, "sbx-a", code, hostA)
	out := hostA.Stdout()
	for _, want := range []string{
		"stolen refused:unknown or expired host token\n",
		"old refused:unknown or expired host token\n",
		"forged refused:unknown or expired host token\n",
		"grpc refused:read hello",
		"other socket FileNotFoundError\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// The sandbox's own memory cgroup count is there when it has a cgroup.
	if !strings.Contains(out, "listing ['host.sock', 'lib']\n") && !strings.Contains(out, "listing ['host.sock', 'lib', 'memory.events']\n") {
		t.Errorf("/cexec holds more than the host socket, the runtime and the memory count:\n%s", out)
	}
	if n := len(hostA.Calls()); n != 0 {
		t.Errorf("sandbox A's execution answered %d calls made with others' tokens", n)
	}
	close(release)
	if res := <-doneB; res.ExitCode != 0 {
		t.Errorf("the execution in B failed: %+v", res)
	}
	if calls := hostB.Calls(); len(calls) != 2 {
		t.Errorf("B's execution answered %d calls, want its own 2", len(calls))
	}
}

// TestCancelInSandbox cancels an execution whose program waits on a direct
// host call: the call's context ends, and Exec returns only after the call
// did.
func TestCancelInSandbox(t *testing.T) {
	_, sb, _ := bwrapBackend(t)
	createBox(t, sb, "sbx-cancel")
	started, ended := make(chan struct{}), make(chan struct{})
	h := &plugintest.Host{OnCall: func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return nil, ctx.Err()
	}}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: "sbx-cancel", Code: `import cexec; cexec.call_tool("s", "slow")`}, h)
	select {
	case <-ended:
	default:
		t.Fatal("Exec returned while the host call was still running")
	}
	if err == nil && res.ExitCode == 0 {
		t.Errorf("cancelled execution ended well: %+v", res)
	}
}
