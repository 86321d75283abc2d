package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/internal/testutil"
)

// The relay is tested against an independent MCP server (mcp-go's
// streamable HTTP server) on a unix socket, where the daemon serves its
// face, with one execute_code tool that runs programs in /usr/bin/python3
// and records the tenant header and session each call came with. The face
// itself is tested in core/mcpface; this is the relay's side.

// scope is what one call arrived with.
type scope struct{ Tenant, Session string }

// tenantKey carries the request's tenant header into the tool handler.
type tenantKey struct{}

// daemon is an MCP server on <dir>/cexecd-mcp.sock, as cexecd serves its
// face next to <dir>/cexecd.sock.
type daemon struct {
	control string
	stop    func()

	mu       sync.Mutex
	scopes   []scope
	sessions int
}

func (d *daemon) last() scope {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.scopes) == 0 {
		return scope{}
	}
	return d.scopes[len(d.scopes)-1]
}

// Sessions is the number of MCP sessions open now.
func (d *daemon) Sessions() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions
}

func (d *daemon) executeCode(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	sc := scope{}
	sc.Tenant, _ = ctx.Value(tenantKey{}).(string)
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		sc.Session = cs.SessionID()
	}
	d.mu.Lock()
	d.scopes = append(d.scopes, sc)
	d.mu.Unlock()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", req.GetString("code", "")).Output()
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(string(out)), nil
}

func startFace(t *testing.T) *daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "cexec-shim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d := &daemon{control: filepath.Join(dir, "cexecd.sock")}
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(context.Context, server.ClientSession) {
		d.mu.Lock()
		d.sessions++
		d.mu.Unlock()
	})
	hooks.AddOnUnregisterSession(func(context.Context, server.ClientSession) {
		d.mu.Lock()
		d.sessions--
		d.mu.Unlock()
	})
	s := server.NewMCPServer("relay-test", "1", server.WithHooks(hooks))
	s.AddTool(mcp.NewTool("execute_code", mcp.WithString("code", mcp.Required())), d.executeCode)
	// Stateful, as the face is: a dropped session's id is refused with 404.
	h := server.NewStreamableHTTPServer(s, server.WithEndpointPath(endpoint.MCPPath), server.WithStateful(true),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, tenantKey{}, r.Header.Get(endpoint.TenantHeader))
		}))
	if err := os.WriteFile(d.control, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", endpoint.MCPSocket(d.control))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(endpoint.MCPPath, h)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	d.stop = sync.OnceFunc(func() { _ = srv.Close() })
	t.Cleanup(d.stop)
	return d
}

// shim runs the relay with pipes for stdin and stdout.
type shim struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan map[string]any
	done   chan error
	stderr *testutil.Buffer
}

func startShim(t *testing.T, o Options) *shim {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &shim{t: t, in: inW, lines: make(chan map[string]any, 16), done: make(chan error, 1), stderr: &testutil.Buffer{}}
	o.Stderr = s.stderr
	go func() {
		s.done <- Run(context.Background(), o, inR, outW)
		_ = outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("stdout line is not JSON: %q", sc.Text())
				continue
			}
			s.lines <- m
		}
		close(s.lines)
	}()
	return s
}

func (s *shim) send(msg string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

func (s *shim) recv() map[string]any {
	s.t.Helper()
	select {
	case m, ok := <-s.lines:
		if !ok {
			s.t.Fatal("stdout closed")
		}
		return m
	case <-time.After(20 * time.Second):
		s.t.Fatal("no message on stdout")
	}
	return nil
}

// close ends stdin and waits for Run to return.
func (s *shim) close() {
	s.t.Helper()
	_ = s.in.Close()
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		s.t.Fatal("Run did not return after stdin closed")
	}
}

const (
	initMsg        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"shim-test","version":"1"}}}`
	initializedMsg = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

func callMsg(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

func resultText(t *testing.T, m map[string]any) string {
	t.Helper()
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %v", m)
	}
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("no content in %v", m)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text
}

func handshake(t *testing.T, s *shim) {
	t.Helper()
	s.send(initMsg)
	m := s.recv()
	if m["id"] != float64(1) || m["result"].(map[string]any)["protocolVersion"] != "2025-06-18" {
		t.Fatalf("initialize: %v", m)
	}
	s.send(initializedMsg)
}

func TestRelaySession(t *testing.T) {
	d := startFace(t)
	s := startShim(t, Options{Address: d.control, Tenant: "acme"})
	handshake(t, s)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := s.recv(); m["id"] != float64(2) || !strings.Contains(fmt.Sprint(m["result"]), "execute_code") {
		t.Errorf("tools/list: %v", m)
	}
	s.send(callMsg(3, "execute_code", `{"code":"print(1+1)"}`))
	if m := s.recv(); m["id"] != float64(3) || !strings.HasPrefix(resultText(t, m), "2\n") {
		t.Errorf("execute_code: %v", m)
	}
	if sc := d.last(); sc.Tenant != "acme" || sc.Session == "" {
		t.Errorf("scope = %+v, want tenant acme and a session", sc)
	}
	// Malformed input gets a parse error, and the session goes on.
	s.send(`{"jsonrpc":`)
	if m := s.recv(); m["error"].(map[string]any)["code"] != float64(-32700) {
		t.Errorf("parse error: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":"x","method":"ping"}`)
	if m := s.recv(); m["id"] != "x" || m["result"] == nil {
		t.Errorf("ping: %v", m)
	}
	if n := d.Sessions(); n != 1 {
		t.Errorf("%d sessions during the relay", n)
	}
	s.close()
	// Closing stdin ends the session.
	if n := d.Sessions(); n != 0 {
		t.Errorf("%d sessions after stdin closed", n)
	}
}

// TestRelayConcurrent: a slow call does not hold up a fast one.
func TestRelayConcurrent(t *testing.T) {
	d := startFace(t)
	s := startShim(t, Options{Address: d.control})
	handshake(t, s)
	s.send(callMsg(10, "execute_code", `{"code":"import time; time.sleep(1.5); print('slow')"}`))
	s.send(callMsg(11, "execute_code", `{"code":"print('fast')"}`))
	first, second := s.recv(), s.recv()
	if first["id"] != float64(11) || second["id"] != float64(10) {
		t.Errorf("answers in order %v, %v; want the fast one first", first["id"], second["id"])
	}
	// No tenant header: the daemon applies its default tenant.
	if sc := d.last(); sc.Tenant != "" {
		t.Errorf("tenant header without a tenant = %q", sc.Tenant)
	}
	s.close()
}

// TestRelayReopensSession: when the daemon dropped the session (restart,
// idle timeout), the relay opens a new one and the client does not notice.
func TestRelayReopensSession(t *testing.T) {
	d := startFace(t)
	s := startShim(t, Options{Address: d.control})
	handshake(t, s)
	s.send(callMsg(2, "execute_code", `{"code":"print('one')"}`))
	s.recv()
	first := d.last().Session

	// End the session behind the relay's back, as the idle sweep would.
	hc := endpoint.UnixClient(endpoint.MCPSocket(d.control))
	req, _ := http.NewRequest(http.MethodDelete, endpoint.UnixBaseURL+endpoint.MCPPath, nil)
	req.Header.Set("Mcp-Session-Id", first)
	res, err := hc.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %v %v", err, res)
	}
	res.Body.Close()

	s.send(callMsg(3, "execute_code", `{"code":"print('two')"}`))
	m := s.recv()
	if m["id"] != float64(3) || !strings.HasPrefix(resultText(t, m), "two\n") {
		t.Fatalf("after the session was dropped: %v", m)
	}
	if second := d.last().Session; second == first || second == "" {
		t.Errorf("session %q after re-open, was %q", second, first)
	}
	s.close()
}

// TestRelayDaemonGone: requests get JSON-RPC errors, not silence, when the
// daemon stops during the relay.
func TestRelayDaemonGone(t *testing.T) {
	d := startFace(t)
	s := startShim(t, Options{Address: d.control})
	handshake(t, s)
	d.stop()
	s.send(callMsg(5, "execute_code", `{"code":"print(1)"}`))
	m := s.recv()
	e, _ := m["error"].(map[string]any)
	if m["id"] != float64(5) || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "is not reachable") {
		t.Errorf("with the daemon gone: %v", m)
	}
	s.close()
}

func TestNoDaemon(t *testing.T) {
	dir := t.TempDir()
	control := filepath.Join(dir, "cexecd.sock")
	err := Run(context.Background(), Options{Address: control}, strings.NewReader(""), io.Discard)
	var nr *client.NotRunningError
	if !errors.As(err, &nr) {
		t.Errorf("without a daemon: %v", err)
	}
	// A daemon that does not serve MCP (its control socket exists, the MCP
	// socket does not).
	if err := os.WriteFile(control, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), Options{Address: control}, strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "does not serve MCP") {
		t.Errorf("without the MCP socket: %v", err)
	}
}

// statusOnly is a control API that answers Status with mcp.
type statusOnly struct {
	cexecv1.UnimplementedControlServer
	mcp *cexecv1.McpStatus
}

func (s statusOnly) Status(context.Context, *cexecv1.StatusRequest) (*cexecv1.StatusResponse, error) {
	return &cexecv1.StatusResponse{Mcp: s.mcp}, nil
}

// TestNoMCPSocket: when the daemon runs but its MCP socket is missing, the
// relay asks its status and says why and what to do, instead of guessing.
func TestNoMCPSocket(t *testing.T) {
	const off = "its directory /run/cexec has mode 0755; make it 0700 with `chmod 700 /run/cexec` and restart cexecd"
	for _, tc := range []struct {
		name string
		mcp  *cexecv1.McpStatus
		want string
	}{
		{"socket off", &cexecv1.McpStatus{SocketOff: off}, "cexecd says: " + off},
		{"older daemon", nil, "predates the MCP face; upgrade it"},
		{"socket removed", &cexecv1.McpStatus{Socket: "/gone"}, "the socket was removed; restart cexecd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			control := filepath.Join(t.TempDir(), "cexecd.sock")
			ln, err := net.Listen("unix", control)
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer()
			cexecv1.RegisterControlServer(g, statusOnly{mcp: tc.mcp})
			go func() { _ = g.Serve(ln) }()
			defer g.Stop()
			err = Run(context.Background(), Options{Address: control}, strings.NewReader(""), io.Discard)
			if err == nil || !strings.Contains(err.Error(), "does not serve MCP") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v; want it to say %q", err, tc.want)
			}
		})
	}
}
