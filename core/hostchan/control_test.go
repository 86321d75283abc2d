package hostchan

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// TestControlRequests checks who may take a sandbox's control: the first
// request while the sandbox is being created, and no one after it was
// created or once a connection has it.
func TestControlRequests(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name   string
		sealed bool
		taken  bool
		want   string
	}{
		{name: "while the sandbox is created", want: "welcome"},
		{name: "a second request", taken: true, want: "refused"},
		{name: "after the sandbox was created", sealed: true, want: "refused"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "sbx-" + string(rune('a'+i))
			m, err := srv.Open(id, nil, runtime.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.taken {
				first := dial(t, m.Source)
				first.send(t, map[string]string{"op": "control"})
				if got := first.recv(t); got["op"] != "welcome" {
					t.Fatalf("first request: %v", got)
				}
			}
			if tt.sealed {
				srv.Seal(id)
			}
			p := dial(t, m.Source)
			p.send(t, map[string]string{"op": "control"})
			got := p.recv(t)
			if got["op"] != tt.want {
				t.Fatalf("answer %v, want %s", got, tt.want)
			}
			if tt.want == "refused" && p.recv(t) != nil {
				t.Error("a refused connection stayed open")
			}
			if ctl := srv.controlOf(id); (ctl != nil) != (tt.want == "welcome" || tt.taken) {
				t.Errorf("control registered: %v", ctl != nil)
			}
		})
	}
}

// TestControlledExecutions runs programs in real bwrap sandboxes behind the
// socket: the zygote asks for control while the sandbox is created, so the
// daemon's runner carries every execution and the plugin counts none of
// them. Limits, cancellation, persistent sessions and host calls behave as
// on the plugin's path.
func TestControlledExecutions(t *testing.T) {
	relay, sb, srv := bwrapBackend(t)
	createBox(t, sb, "sbx-ctl")
	if ctl := srv.controlOf("sbx-ctl"); ctl == nil || !ctl.runner.Healthy() {
		t.Fatal("the zygote is not controlled through its socket")
	}
	tests := []struct {
		name   string
		req    sandbox.ExecRequest
		cancel time.Duration
		check  func(t *testing.T, res sandbox.ExecResult, err error, h *plugintest.Host)
	}{
		{name: "output and result", req: sandbox.ExecRequest{Code: "import cexec\nprint(1+1)\ncexec.result({'a': 1})"},
			check: func(t *testing.T, res sandbox.ExecResult, err error, h *plugintest.Host) {
				if err != nil || res.ExitCode != 0 || h.Stdout() != "2\n" || string(res.Result) != `{"a":1}` {
					t.Errorf("%v %+v stdout %q", err, res, h.Stdout())
				}
			}},
		{name: "an error", req: sandbox.ExecRequest{Code: "raise ValueError('no')"},
			check: func(t *testing.T, res sandbox.ExecResult, err error, _ *plugintest.Host) {
				if err != nil || res.ExitCode != 1 || res.Error == nil || res.Error.Type != "ValueError" || !res.SandboxOK {
					t.Errorf("%v %+v", err, res)
				}
			}},
		{name: "a host call", req: sandbox.ExecRequest{Code: "from cexec import call_tool\nprint(call_tool('s', 't', {})['method'])"},
			check: func(t *testing.T, res sandbox.ExecResult, err error, h *plugintest.Host) {
				if err != nil || res.ExitCode != 0 || h.Stdout() != "call_tool\n" {
					t.Errorf("%v %+v stdout %q stderr %q", err, res, h.Stdout(), h.Stderr())
				}
			}},
		{name: "the time limit", req: sandbox.ExecRequest{Code: "while True: pass", Timeout: time.Second},
			check: func(t *testing.T, res sandbox.ExecResult, err error, _ *plugintest.Host) {
				// As on the plugin's path: the pool replaces such a sandbox.
				if err != nil || !res.TimedOut || res.SandboxOK {
					t.Errorf("%v %+v", err, res)
				}
			}},
		{name: "cancelled", req: sandbox.ExecRequest{Code: "import time\nprint('go', flush=True)\ntime.sleep(60)"}, cancel: 300 * time.Millisecond,
			check: func(t *testing.T, res sandbox.ExecResult, err error, h *plugintest.Host) {
				if !errors.Is(err, context.Canceled) || res.Error == nil || res.Error.Type != "Killed" || res.SandboxOK || h.Stdout() != "go\n" {
					t.Errorf("%v %+v stdout %q", err, res, h.Stdout())
				}
			}},
		{name: "a persistent session, first", req: sandbox.ExecRequest{Code: "x = 41", Persistent: true, Session: "s1"},
			check: func(t *testing.T, res sandbox.ExecResult, err error, _ *plugintest.Host) {
				if err != nil || res.ExitCode != 0 {
					t.Errorf("%v %+v", err, res)
				}
			}},
		{name: "a persistent session, second", req: sandbox.ExecRequest{Code: "print(x + 1)", Persistent: true, Session: "s1"},
			check: func(t *testing.T, res sandbox.ExecResult, err error, h *plugintest.Host) {
				if err != nil || h.Stdout() != "42\n" {
					t.Errorf("%v %+v stdout %q stderr %q", err, res, h.Stdout(), h.Stderr())
				}
			}},
		{name: "a program asks for control", req: sandbox.ExecRequest{Code: askControl},
			check: func(t *testing.T, res sandbox.ExecResult, err error, h *plugintest.Host) {
				if err != nil || res.ExitCode != 0 || !strings.HasPrefix(h.Stdout(), "refused") {
					t.Errorf("%v %+v stdout %q stderr %q", err, res, h.Stdout(), h.Stderr())
				}
			}},
		{name: "the program sees no control descriptor", req: sandbox.ExecRequest{Code: "import os\nprint(sorted(int(f) for f in os.listdir('/proc/self/fd')))"},
			check: func(t *testing.T, res sandbox.ExecResult, err error, h *plugintest.Host) {
				// 0-2, the channel to the zygote and listdir's own.
				if err != nil || h.Stdout() != "[0, 1, 2, 3, 4]\n" {
					t.Errorf("%v %+v stdout %q", err, res, h.Stdout())
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			if tt.cancel > 0 {
				time.AfterFunc(tt.cancel, cancel)
			}
			h := echoHost()
			req := tt.req
			req.SandboxID = "sbx-ctl"
			res, err := sb.Exec(ctx, req, h)
			tt.check(t, res, err, h)
		})
	}
	// Every execution above went through the daemon's runner.
	own, err := relay.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := sb.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 1 || len(wrapped) != 1 || own[0].Executions != 0 || wrapped[0].Executions != int64(len(tests)) {
		t.Errorf("the plugin counted %+v, the daemon %+v; want 0 and %d", own, wrapped, len(tests))
	}
	if err := relay.Health(t.Context(), "sbx-ctl"); err != nil {
		t.Errorf("the plugin's own channel: %v", err)
	}
}

// askControl connects to the host socket as the zygote does and prints the
// host's answer.
const askControl = `
import _socket, struct, json
s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
s.connect("/cexec/host.sock")
b = json.dumps({"op": "control"}).encode()
s.sendall(struct.pack(">IB", len(b), ord("J")) + b)
n, _ = struct.unpack(">IB", s.recv(5))
print(json.loads(s.recv(n))["op"])
`

// TestControlledZygoteStuck stops a zygote that is controlled through its
// socket: the daemon's runner gives up after the deadline and its grace,
// and has the backend destroy the sandbox, as the plugin's own runner does.
func TestControlledZygoteStuck(t *testing.T) {
	relay, sb, srv := bwrapBackend(t)
	createBox(t, sb, "sbx-stuck")
	ctl := srv.controlOf("sbx-stuck")
	if ctl == nil || ctl.pid == 0 {
		t.Fatalf("no controlled zygote with a known pid: %+v", ctl)
	}
	testutil.Stop(t, ctl.pid)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: "sbx-stuck", Code: "print(1)", Timeout: 500 * time.Millisecond}, echoHost())
	if err == nil && res.SandboxOK {
		t.Fatalf("a stopped zygote's execution succeeded: %+v", res)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := relay.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox of a stuck zygote was not destroyed: %+v", list)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// healthSpy counts the health checks that reach the plugin.
type healthSpy struct {
	sandbox.Sandbox
	checks atomic.Int32
}

func (s *healthSpy) Health(ctx context.Context, id string) error {
	s.checks.Add(1)
	return s.Sandbox.Health(ctx, id)
}

// TestControlledHealth: a zygote controlled through its socket is known
// alive from its connection, with no round trip into the plugin; one that
// died is reported unhealthy by the plugin's check, so the pool replaces it.
func TestControlledHealth(t *testing.T) {
	relay, _, srv := bwrapBackend(t)
	spy := &healthSpy{Sandbox: relay}
	sb := Wrap(srv, spy)
	createBox(t, sb, "sbx-health")
	ctl := srv.controlOf("sbx-health")
	if ctl == nil || ctl.pid == 0 {
		t.Fatalf("no controlled zygote with a known pid: %+v", ctl)
	}
	if err := sb.Health(t.Context(), "sbx-health"); err != nil || spy.checks.Load() != 0 {
		t.Fatalf("live zygote: %v, %d checks reached the plugin; want nil and none", err, spy.checks.Load())
	}

	if err := syscall.Kill(ctl.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctl.runner.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon's runner did not see its zygote die")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := sb.Health(ctx, "sbx-health"); err == nil || spy.checks.Load() != 1 {
		t.Errorf("dead zygote: %v after %d plugin checks; want an error from the plugin's", err, spy.checks.Load())
	}
}
