package hostchan

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// peer is the program's end of a connection to a host call socket.
type peer struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, path string) *peer {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &peer{c: c, r: bufio.NewReader(c)}
}

func (p *peer) send(t testing.TB, msg any) {
	t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	p.raw(t, append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), 'J'), b)
}

func (p *peer) raw(t testing.TB, parts ...[]byte) {
	t.Helper()
	for _, b := range parts {
		if _, err := p.c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

// recv reads one JSON frame; nil at the end of the connection.
func (p *peer) recv(t testing.TB) map[string]any {
	t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(p.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
			return nil
		}
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:4]))
	if _, err := io.ReadFull(p.r, b); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("frame %q: %v", b, err)
	}
	return m
}

func (p *peer) call(t testing.TB, id int, method string, params any) map[string]any {
	t.Helper()
	p.send(t, map[string]any{"op": "call", "id": id, "method": method, "params": params})
	return p.recv(t)
}

func newServer(t testing.TB) *Server {
	t.Helper()
	srv, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func echoHost() *plugintest.Host {
	return &plugintest.Host{OnCall: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "fail":
			return nil, &sandbox.CallError{Type: "ToolNotFound", Message: "no such tool"}
		case "plain":
			return nil, errors.New("backend exploded")
		}
		return json.RawMessage(`{"method":"` + method + `","params":` + string(params) + `}`), nil
	}}
}

// TestTokenChecks presents tokens to sockets and checks who gets served.
func TestTokenChecks(t *testing.T) {
	srv := newServer(t)
	mountA, err := srv.Open("sbx-a", nil, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mountB, err := srv.Open("sbx-b", nil, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if mountA.Target != runtime.HostSocket || mountA.ReadOnly {
		t.Fatalf("mount = %+v, want a read-write bind at %s", mountA, runtime.HostSocket)
	}
	hostA := echoHost()
	tokA, revokeA, err := srv.Grant(t.Context(), "sbx-a", hostA)
	if err != nil {
		t.Fatal(err)
	}
	defer revokeA()
	tokB, revokeB, err := srv.Grant(t.Context(), "sbx-b", echoHost())
	if err != nil {
		t.Fatal(err)
	}
	defer revokeB()
	tokOld, revokeOld, err := srv.Grant(t.Context(), "sbx-a", echoHost())
	if err != nil {
		t.Fatal(err)
	}
	revokeOld()

	tests := []struct {
		name   string
		socket string
		token  string
		served bool
		reason string
	}{
		{"own token", mountA.Source, tokA, true, ""},
		{"another sandbox's token", mountA.Source, tokB, false, "unknown or expired"},
		{"forged token", mountA.Source, strings.Repeat("ab", 32), false, "unknown or expired"},
		{"token of an ended execution", mountA.Source, tokOld, false, "unknown or expired"},
		{"token reused by a second connection", mountA.Source, tokA, false, "already in use"},
		{"other sandbox's own token", mountB.Source, tokB, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := dial(t, tt.socket)
			p.send(t, runtime.HostHello{Op: "hello", Token: tt.token})
			if !tt.served {
				got := p.recv(t)
				if got["op"] != "refused" || !strings.Contains(got["error"].(string), tt.reason) {
					t.Fatalf("got %v, want refused (%s)", got, tt.reason)
				}
				if m := p.recv(t); m != nil {
					t.Fatalf("connection still open after refusal: %v", m)
				}
				return
			}
			got := p.call(t, 1, "call_tool", map[string]any{"server": "s", "tool": "t"})
			if got["op"] != "reply" || got["id"] != 1.0 || got["result"].(map[string]any)["method"] != "call_tool" {
				t.Fatalf("got %v, want the reply to call 1", got)
			}
		})
	}
	if n := len(hostA.Calls()); n != 1 {
		t.Errorf("sandbox A's execution answered %d calls, want 1 (its own)", n)
	}
}

// TestNotAControlAPI feeds the socket what a control API client sends
// first; the connection is refused without reaching a host.
func TestNotAControlAPI(t *testing.T) {
	srv := newServer(t)
	m, err := srv.Open("sbx-a", nil, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host := echoHost()
	_, revoke, err := srv.Grant(t.Context(), "sbx-a", host)
	if err != nil {
		t.Fatal(err)
	}
	defer revoke()
	for name, first := range map[string]string{
		"grpc preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"http request": "GET /v1/status HTTP/1.1\r\nHost: cexec\r\n\r\n",
		"call first":   "\x00\x00\x00\x29J" + `{"op":"call","id":1,"method":"call_tool"}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := dial(t, m.Source)
			p.raw(t, []byte(first))
			if got := p.recv(t); got == nil || got["op"] != "refused" {
				t.Fatalf("got %v, want a refusal", got)
			}
		})
	}
	if n := len(host.Calls()); n != 0 {
		t.Errorf("host answered %d calls", n)
	}
}

// TestErrorsAndRevoke checks the errors a program sees, and that revoking
// a grant cancels a call in flight and waits for it.
func TestErrorsAndRevoke(t *testing.T) {
	srv := newServer(t)
	m, err := srv.Open("sbx-a", nil, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	started, returned := make(chan struct{}), make(chan error, 1)
	host := echoHost()
	inner := host.OnCall
	host.OnCall = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method != "slow" {
			return inner(ctx, method, params)
		}
		close(started)
		<-ctx.Done()
		returned <- ctx.Err()
		return nil, ctx.Err()
	}
	tok, revoke, err := srv.Grant(t.Context(), "sbx-a", host)
	if err != nil {
		t.Fatal(err)
	}
	p := dial(t, m.Source)
	p.send(t, runtime.HostHello{Op: "hello", Token: tok})
	if got := p.call(t, 1, "fail", nil); got["error_type"] != "ToolNotFound" || got["error"] != "no such tool" {
		t.Errorf("CallError reply = %v", got)
	}
	if got := p.call(t, 2, "plain", nil); got["error_type"] != sandbox.DefaultCallErrorType || got["error"] != "backend exploded" {
		t.Errorf("plain error reply = %v", got)
	}
	p.send(t, map[string]any{"op": "call", "id": 3, "method": "slow"})
	<-started
	revoke()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call in flight ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("revoke returned before the call in flight did")
	}
	if got := p.recv(t); got != nil && got["op"] == "reply" && got["result"] != nil {
		t.Errorf("cancelled call got a result: %v", got)
	}
}

// TestSocketFiles checks the directory and socket modes and that closing
// removes them.
func TestSocketFiles(t *testing.T) {
	srv := newServer(t)
	fi, err := os.Stat(srv.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %v, want 0700", fi.Mode().Perm())
	}
	m, err := srv.Open("sbx-a", nil, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Open("sbx-a", nil, runtime.Options{}); err == nil {
		t.Error("a second socket for one sandbox was opened")
	}
	srv.CloseSandbox("sbx-a")
	if _, err := os.Stat(m.Source); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after CloseSandbox: %v", err)
	}
	if srv.Has("sbx-a") {
		t.Error("Has after CloseSandbox")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory still there after Close: %v", err)
	}
}

// TestConnectionLimit opens connections that never say hello: past
// maxConns they are refused at once, and closing the sandbox does not wait
// for the silent ones' hello timeout.
func TestConnectionLimit(t *testing.T) {
	srv := newServer(t)
	srv.hello = time.Hour
	m, err := srv.Open("sbx-a", nil, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	silent := make([]*peer, 0, maxConns)
	for range maxConns {
		silent = append(silent, dial(t, m.Source))
	}
	// The server may not have counted the last ones yet: try until one is
	// refused.
	refused := false
	for range 50 {
		p := dial(t, m.Source)
		_ = p.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var hdr [5]byte
		if _, err := io.ReadFull(p.r, hdr[:]); err == nil {
			refused = true
			break
		}
	}
	if !refused {
		t.Fatalf("no refusal after %d silent connections", maxConns)
	}
	// Were CloseSandbox to wait for the silent connections' hello, it
	// would wait an hour and the test would time out.
	srv.CloseSandbox("sbx-a")
	for _, p := range silent {
		if m := p.recv(t); m != nil && m["op"] != "refused" {
			t.Errorf("silent connection got %v", m)
		}
	}
}
