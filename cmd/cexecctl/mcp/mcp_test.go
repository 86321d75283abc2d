package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/client/mcpclient"
	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/pluginapi"
)

// The relay is tested against the real face on a unix socket, as the
// daemon serves it, with small in-test services: programs run in
// /usr/bin/python3 and every call records the scope it ran in.

type services struct {
	mu     sync.Mutex
	scopes []mcpface.Scope
}

func (s *services) saw(sc mcpface.Scope) {
	s.mu.Lock()
	s.scopes = append(s.scopes, sc)
	s.mu.Unlock()
}

func (s *services) last() mcpface.Scope {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scopes[len(s.scopes)-1]
}

func (s *services) Servers(_ context.Context, sc mcpface.Scope) ([]mcpface.Server, error) {
	s.saw(sc)
	return []mcpface.Server{{Name: "demo", Package: "demo", State: "local", Tools: 0}}, nil
}

func (s *services) Tools(_ context.Context, sc mcpface.Scope, server string) ([]mcpface.Tool, error) {
	if server != "" && server != "demo" {
		return nil, fmt.Errorf("server %q: %w", server, pluginapi.ErrNotFound)
	}
	return nil, nil
}

func (s *services) StubSource(context.Context, mcpface.Scope, string, string) (string, error) {
	return "", pluginapi.ErrNotFound
}

func (s *services) Search(context.Context, mcpface.Scope, string, int) ([]mcpface.Hit, error) {
	return nil, nil
}

func (s *services) Execute(ctx context.Context, sc mcpface.Scope, code string) (mcpface.Execution, error) {
	s.saw(sc)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-I", "-c", code)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ex := mcpface.Execution{}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return ex, err
		}
		ex.Error = &mcpface.ExecError{Type: "Error", Message: "exit status " + fmt.Sprint(ee.ExitCode()), Traceback: stderr.String()}
	}
	ex.Stdout, ex.Duration = stdout.String(), time.Since(start)
	return ex, nil
}

func (s *services) ListState(context.Context, mcpface.Scope) ([]mcpface.StateFile, error) {
	return nil, nil
}

func (s *services) GetState(context.Context, mcpface.Scope, string) (json.RawMessage, error) {
	return nil, pluginapi.ErrNotFound
}

func (s *services) SaveState(context.Context, mcpface.Scope, string, json.RawMessage) error {
	return nil
}

func (s *services) ListSkills(context.Context, mcpface.Scope) ([]mcpface.Skill, error) {
	return nil, nil
}

func (s *services) GetSkill(context.Context, mcpface.Scope, string) (mcpface.Skill, error) {
	return mcpface.Skill{}, pluginapi.ErrNotFound
}

func (s *services) SaveSkill(context.Context, mcpface.Scope, string, string, string) (mcpface.Skill, error) {
	return mcpface.Skill{}, pluginapi.ErrInvalidArgument
}

// daemon is a face served on <dir>/cexecd-mcp.sock, as cexecd serves it
// next to <dir>/cexecd.sock.
type daemon struct {
	face    *mcpface.Face
	svc     *services
	control string
	stop    func()
}

func startFace(t *testing.T) *daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "cexec-shim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	svc := &services{}
	f, err := mcpface.New(mcpface.Options{Catalog: svc, Searcher: svc, Executor: svc, State: svc, Skills: svc, PII: mcpface.Untokenized{}})
	if err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, "cexecd.sock")
	if err := os.WriteFile(control, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := mcpface.ListenUnix(endpoint.MCPSocket(control))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, ln, 5*time.Second) }()
	d := &daemon{face: f, svc: svc, control: control}
	d.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	t.Cleanup(d.stop)
	return d
}

// shim runs the relay with pipes for stdin and stdout.
type shim struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan map[string]any
	done   chan error
	stderr *bytes.Buffer
}

func startShim(t *testing.T, o Options) *shim {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &shim{t: t, in: inW, lines: make(chan map[string]any, 16), done: make(chan error, 1), stderr: &bytes.Buffer{}}
	o.Stderr = &lockedWriter{w: s.stderr}
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

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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
	if sc := d.svc.last(); sc.Tenant != "acme" || sc.Session == "" {
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
	if n := d.face.Sessions(); n != 1 {
		t.Errorf("%d sessions during the relay", n)
	}
	s.close()
	// Closing stdin ends the session.
	if n := d.face.Sessions(); n != 0 {
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
	if sc := d.svc.last(); sc.Tenant != mcpface.DefaultTenant {
		t.Errorf("tenant without --tenant = %q", sc.Tenant)
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
	first := d.svc.last().Session

	// End the session behind the relay's back, as the idle sweep would.
	hc := mcpclient.UnixClient(endpoint.MCPSocket(d.control))
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
	if second := d.svc.last().Session; second == first || second == "" {
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
