package mcpface

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
)

// rawClient speaks streamable HTTP by hand, to see status codes and headers.
type rawClient struct {
	t       testing.TB
	hc      *http.Client
	url     string
	header  http.Header
	session string
}

func newRaw(t testing.TB, hc *http.Client, url string) *rawClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &rawClient{t: t, hc: hc, url: url, header: http.Header{}}
}

func (c *rawClient) do(method, body string, extra ...string) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header = c.header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if strings.EqualFold(extra[i], "Host") {
			req.Host = extra[i+1]
		} else {
			req.Header.Set(extra[i], extra[i+1])
		}
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		// A response stream: its first event is the answer.
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return res, d
			}
		}
		return res, ""
	}
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
const listBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// initialize opens a session and returns the initialize response's status.
func (c *rawClient) initialize(extra ...string) int {
	c.t.Helper()
	res, _ := c.do(http.MethodPost, initBody, extra...)
	if res.StatusCode == http.StatusOK {
		c.session = res.Header.Get("Mcp-Session-Id")
		if r, _ := c.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, extra...); r.StatusCode != http.StatusAccepted {
			c.t.Fatalf("initialized: %s", r.Status)
		}
	}
	return res.StatusCode
}

// TestSessionDeadAfterDelete: after DELETE, the session id gets 404 for
// every method, and the session's end is reported.
func TestSessionDeadAfterDelete(t *testing.T) {
	w := newWorld(t)
	c := newRaw(t, nil, w.url+"/mcp")
	if st := c.initialize(); st != http.StatusOK || c.session == "" {
		t.Fatalf("initialize: %d, session %q", st, c.session)
	}
	if !validSessionID(c.session) {
		t.Errorf("session id %q is not a valid workspace session id", c.session)
	}
	if res, body := c.do(http.MethodPost, listBody); res.StatusCode != http.StatusOK || !strings.Contains(body, "execute_code") {
		t.Fatalf("tools/list: %s %s", res.Status, body)
	}
	if res, _ := c.do(http.MethodDelete, ""); res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", res.Status)
	}
	select {
	case sc := <-w.ended:
		if sc.Session != c.session || sc.Tenant != DefaultTenant {
			t.Errorf("ended %+v, want session %s of %s", sc, c.session, DefaultTenant)
		}
	case <-time.After(5 * time.Second):
		t.Error("the session's end was not reported")
	}
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		if res, body := c.do(method, listBody); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s with a deleted session: %s %s", method, res.Status, body)
		}
	}
	if n := w.face.Sessions(); n != 0 {
		t.Errorf("%d sessions live after DELETE", n)
	}
}

func TestOriginAndHost(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.AllowedOrigins = []string{"https://app.example.com", "http://localhost:5173"}
	})
	tests := []struct {
		name   string
		header []string
		want   int
	}{
		{"no origin (not a browser)", nil, http.StatusOK},
		// Any local web page has a localhost origin: only configured ones pass.
		{"configured localhost origin", []string{"Origin", "http://localhost:5173"}, http.StatusOK},
		{"other localhost origin", []string{"Origin", "http://localhost:3000"}, http.StatusForbidden},
		{"loopback ip origin", []string{"Origin", "http://127.0.0.1:8080"}, http.StatusForbidden},
		{"ipv6 loopback origin", []string{"Origin", "http://[::1]:8080"}, http.StatusForbidden},
		{"the face's own origin", []string{"Origin", w.url}, http.StatusOK},
		{"allowed origin", []string{"Origin", "https://APP.example.com"}, http.StatusOK},
		{"other origin", []string{"Origin", "https://evil.example.com"}, http.StatusForbidden},
		{"allowed host, other scheme", []string{"Origin", "http://app.example.com"}, http.StatusForbidden},
		{"opaque origin", []string{"Origin", "null"}, http.StatusForbidden},
		{"rebinding host", []string{"Host", "evil.example.com", "Origin", "http://evil.example.com"}, http.StatusForbidden},
		{"rebinding host without origin", []string{"Host", "evil.example.com:80"}, http.StatusForbidden},
		{"allowed origin's host", []string{"Host", "app.example.com", "Origin", "https://app.example.com"}, http.StatusOK},
		{"localhost host", []string{"Host", "localhost:1234"}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRaw(t, nil, w.url+"/mcp")
			if got := c.initialize(tt.header...); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
		})
	}
}

func TestBearerTokens(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}, {Token: "tok-beta", Tenant: "beta"}}
	})
	tests := []struct {
		name   string
		header []string
		want   int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"wrong token", []string{"Authorization", "Bearer tok-nope"}, http.StatusUnauthorized},
		{"prefix of a token", []string{"Authorization", "Bearer tok-acm"}, http.StatusUnauthorized},
		{"basic auth", []string{"Authorization", "Basic dG9rLWFjbWU="}, http.StatusUnauthorized},
		{"token", []string{"Authorization", "Bearer tok-acme"}, http.StatusOK},
		{"lower-case scheme", []string{"Authorization", "bearer tok-beta"}, http.StatusOK},
		{"token and its tenant", []string{"Authorization", "Bearer tok-acme", endpoint.TenantHeader, "acme"}, http.StatusOK},
		{"token and another tenant", []string{"Authorization", "Bearer tok-acme", endpoint.TenantHeader, "beta"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRaw(t, nil, w.url+"/mcp")
			res, _ := c.do(http.MethodPost, initBody, tt.header...)
			if res.StatusCode != tt.want {
				t.Errorf("status %s, want %d", res.Status, tt.want)
			}
			if tt.want == http.StatusUnauthorized && res.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	// A session belongs to the tenant that opened it.
	acme := newRaw(t, nil, w.url+"/mcp")
	acme.header.Set("Authorization", "Bearer tok-acme")
	if st := acme.initialize(); st != http.StatusOK {
		t.Fatalf("initialize: %d", st)
	}
	thief := newRaw(t, nil, w.url+"/mcp")
	thief.header.Set("Authorization", "Bearer tok-beta")
	thief.session = acme.session
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		if res, _ := thief.do(method, listBody); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s of acme's session with beta's token: %s", method, res.Status)
		}
	}
	if res, body := acme.do(http.MethodPost, listBody); res.StatusCode != http.StatusOK {
		t.Errorf("acme's session after beta's attempts: %s %s", res.Status, body)
	}
}

func TestNoTokens(t *testing.T) {
	w := newWorld(t)
	c := newRaw(t, nil, w.url+"/mcp")
	if st := c.initialize(endpoint.TenantHeader, "acme"); st != http.StatusForbidden {
		t.Errorf("choosing a tenant over TCP without tokens: %d", st)
	}
	if st := c.initialize(endpoint.TenantHeader, DefaultTenant); st != http.StatusOK {
		t.Errorf("naming the default tenant: %d", st)
	}
	f := w.face
	tests := []struct {
		kind   listenerKind
		status int
	}{
		{viaLoopback, 0},
		{viaNetwork, http.StatusForbidden},
		{viaUnix, 0},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		if _, st, msg := f.tenantOf(httptest.NewRecorder(), r, tt.kind); st != tt.status {
			t.Errorf("kind %d: status %d (%s), want %d", tt.kind, st, msg, tt.status)
		}
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		addr   string
		tokens bool
		ok     bool
	}{
		{"127.0.0.1:7797", false, true},
		{"127.0.0.2:0", false, true},
		{"localhost:0", false, true},
		{"[::1]:0", false, true},
		{"0.0.0.0:7797", false, false},
		{":7797", false, false},
		{"[::]:7797", false, false},
		{"10.0.0.5:7797", false, false},
		{"mcp.example.com:443", false, false},
		{"0.0.0.0:7797", true, true},
		{"127.0.0.1", false, false},
	}
	for _, tt := range tests {
		err := CheckListen(tt.addr, tt.tokens)
		if (err == nil) != tt.ok {
			t.Errorf("CheckListen(%q, %v) = %v", tt.addr, tt.tokens, err)
		}
		if err != nil && tt.addr != "127.0.0.1" && !errors.Is(err, ErrNoAuth) {
			t.Errorf("CheckListen(%q) = %v, want ErrNoAuth", tt.addr, err)
		}
	}
	w := newWorld(t)
	if _, err := w.face.ListenTCP("0.0.0.0:0"); !errors.Is(err, ErrNoAuth) {
		t.Errorf("ListenTCP on all interfaces without tokens: %v", err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := w.face.Serve(context.Background(), ln, time.Second); !errors.Is(err, ErrNoAuth) {
		t.Errorf("Serve on all interfaces without tokens: %v", err)
	}
}

// TestUnixSocket: on the private socket the tenant header chooses the
// tenant; the socket is 0600 and its directory must be private.
func TestUnixSocket(t *testing.T) {
	w := newWorld(t, func(_ *Options, w *world) { w.catalog.allowed["acme"] = []string{"memory"} })
	dir, err := os.MkdirTemp("", "cexec-mcp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := endpoint.MCPSocket(filepath.Join(dir, "cexecd.sock"))
	if filepath.Base(path) != "cexecd-mcp.sock" {
		t.Errorf("SocketPath = %s", path)
	}
	if _, err := ListenUnix(path); err == nil || !strings.Contains(err.Error(), "must be 0700") {
		t.Errorf("ListenUnix in a shared directory: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A stale socket file is replaced.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v", st.Mode(), err)
	}
	serve(t, w.face, ln)

	hc := endpoint.UnixClient(path)
	acme := connect(t, endpoint.UnixBaseURL+endpoint.MCPPath, transport.WithHTTPBasicClient(hc),
		transport.WithHTTPHeaders(map[string]string{endpoint.TenantHeader: "acme"}))
	if text, _ := call(t, acme, ToolListTools, nil); strings.Contains(text, "everything") || !strings.Contains(text, "memory") {
		t.Errorf("acme over the socket sees:\n%s", text)
	}
	def := connect(t, endpoint.UnixBaseURL+endpoint.MCPPath, transport.WithHTTPBasicClient(hc))
	if text, _ := call(t, def, ToolListTools, nil); !strings.Contains(text, "everything") {
		t.Errorf("the default tenant over the socket sees:\n%s", text)
	}
	bad := newRaw(t, hc, endpoint.UnixBaseURL+endpoint.MCPPath)
	if st := bad.initialize(endpoint.TenantHeader, "../etc"); st != http.StatusBadRequest {
		t.Errorf("invalid tenant header: %d", st)
	}

	// mcp-go's Close sends its DELETE without the tenant header; it still
	// ends acme's session rather than leaving it to the idle sweep.
	live := w.face.Sessions()
	if err := acme.Close(); err != nil {
		t.Fatal(err)
	}
	if n := w.face.Sessions(); n != live-1 {
		t.Errorf("%d sessions live after acme's client closed, want %d", n, live-1)
	}
	select {
	case sc := <-w.ended:
		if sc.Tenant != "acme" {
			t.Errorf("ended %+v, want acme's session", sc)
		}
	case <-time.After(5 * time.Second):
		t.Error("the end of acme's session was not reported")
	}
}

// TestSSE drives the HTTP+SSE transport with the real client.
func TestSSE(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}, {Token: "tok-beta", Tenant: "beta"}}
	})
	c, err := mcpgo.NewSSEMCPClient(w.url+endpoint.SSEPath, transport.WithHeaders(map[string]string{"Authorization": "Bearer tok-acme"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := initRequest()
	req.Params.ProtocolVersion = mcp.ProtocolVersion20241105
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": "print(6*7)"})
	if res.IsError || !strings.HasPrefix(text, "42\n") {
		t.Errorf("execute_code over SSE: %s", text)
	}
	// Another tenant cannot post into acme's SSE session.
	sseURL := c.GetTransport().(*transport.SSE).GetEndpoint()
	sessionID := sseURL.Query().Get("sessionId")
	if owner, ok := w.face.sessions.owner(sessionID); !ok || owner != "acme" {
		t.Fatalf("SSE session %q: owner %q, %v", sessionID, owner, ok)
	}
	post := newRaw(t, nil, w.url+endpoint.MessagePath+"?sessionId="+sessionID)
	post.header.Set("Authorization", "Bearer tok-beta")
	if res, _ := post.do(http.MethodPost, listBody); res.StatusCode != http.StatusNotFound {
		t.Errorf("beta posting to acme's SSE session: %s", res.Status)
	}
	_ = c.Close()
	select {
	case sc := <-w.ended:
		if sc.Tenant != "acme" {
			t.Errorf("ended %+v", sc)
		}
	case <-time.After(5 * time.Second):
		t.Error("the SSE session's end was not reported")
	}
}

// TestResources lists and reads stubs and skills as MCP resources.
func TestResources(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	call(t, c, ToolSkills, map[string]any{"name": "greet", "description": "Greets ann@example.com", "code": "def run():\n    return 'hi'\n"})
	w.skills.broken = map[string]error{"broken": errors.New(`SKILL.md line 2: cannot parse "owner: bob@example.com"`)}
	ctx := context.Background()
	list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	uris := map[string]bool{}
	for _, r := range list.Resources {
		uris[r.URI] = true
	}
	for _, want := range []string{"cexec://servers/everything/get_sum.py", "cexec://servers/memory/read_graph.py", "cexec://skills/greet"} {
		if !uris[want] {
			t.Errorf("resources/list lacks %s (%d resources)", want, len(list.Resources))
		}
	}
	if len(list.Resources) != 13+9+1 {
		t.Errorf("%d resources, want 23", len(list.Resources))
	}
	templates, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil || len(templates.ResourceTemplates) != 2 {
		t.Errorf("templates: %v %v", templates, err)
	}
	tests := []struct {
		uri  string
		want string
		err  bool
	}{
		{"cexec://servers/everything/get_sum.py", "def get_sum(", false},
		{"cexec://skills/greet", "Greets [EMAIL_1]", false},
		{"cexec://servers/everything/nope.py", "cexec://servers/everything/nope.py (no such stub", true},
		{"cexec://skills/nope", "cexec://skills/nope (no such skill", true},
		// The error message reaches the model too.
		{"cexec://skills/broken", `read cexec://skills/broken: skill broken: SKILL.md line 2: cannot parse "owner: [EMAIL_`, true},
	}
	for _, tt := range tests {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = tt.uri
		res, err := c.ReadResource(ctx, req)
		if tt.err {
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "bob@") {
				t.Errorf("read %s: %v", tt.uri, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("read %s: %v", tt.uri, err)
			continue
		}
		tc, ok := res.Contents[0].(mcp.TextResourceContents)
		if !ok || !strings.Contains(tc.Text, tt.want) {
			t.Errorf("read %s: %+v", tt.uri, res.Contents)
		}
	}
	// The skills list says which folder is not a usable skill, and why,
	// tokenized like any reply.
	if text, _ := call(t, c, ToolSkills, nil); !strings.Contains(text, `broken (not usable: SKILL.md line 2: cannot parse "owner: [EMAIL_`) ||
		!strings.Contains(text, "/workspace/skills/broken/SKILL.md") || strings.Contains(text, "bob@") {
		t.Errorf("skills list:\n%s", text)
	}
	// An error that cannot be checked does not reach the model.
	w.pii.mu.Lock()
	w.pii.fail = true
	w.pii.mu.Unlock()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "cexec://skills/broken"
	if _, err := c.ReadResource(ctx, req); err == nil || !strings.Contains(err.Error(), "withheld") || strings.Contains(err.Error(), "bob@") {
		t.Errorf("read with the tokenizer down: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	w := newWorld(t)
	base := w.face.o
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no executor", func(o *Options) { o.Executor = nil }, "missing Executor"},
		{"no tokenizer", func(o *Options) { o.PII = nil }, "missing PII"},
		{"empty token", func(o *Options) { o.Tokens = []Token{{Token: "", Tenant: "a"}} }, "token 1 is empty"},
		{"bad tenant", func(o *Options) { o.Tokens = []Token{{Token: "x", Tenant: "A/B"}} }, "invalid tenant"},
		{"duplicate token", func(o *Options) { o.Tokens = []Token{{"x", "a"}, {"x", "b"}} }, "duplicate"},
		{"bad origin", func(o *Options) { o.AllowedOrigins = []string{"app.example.com"} }, "invalid origin"},
		{"origin with path", func(o *Options) { o.AllowedOrigins = []string{"https://app.example.com/x"} }, "invalid origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			tt.edit(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestApplyConfig(t *testing.T) {
	var o Options
	o.ApplyConfig(config.MCP{
		Listen: "127.0.0.1:7797", SSE: true, AllowedOrigins: []string{"https://app.example.com"},
		Tokens:            []config.MCPToken{{Token: "t1", Tenant: "acme"}},
		ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: 3 * time.Second,
		MaxConnections: 5, MaxConnectionsPerPeer: 4, MaxRequestBody: 3, MaxSessionsPerTenant: 2,
	})
	if !o.SSE || len(o.AllowedOrigins) != 1 || len(o.Tokens) != 1 || o.Tokens[0] != (Token{Token: "t1", Tenant: "acme"}) ||
		o.ReadHeaderTimeout != time.Second || o.ReadTimeout != 2*time.Second || o.IdleTimeout != 3*time.Second ||
		o.MaxConnections != 5 || o.MaxConnectionsPerPeer != 4 || o.MaxRequestBody != 3 || o.MaxSessionsPerTenant != 2 {
		t.Errorf("options = %+v", o)
	}
}

// TestCORS: a page of an allowed origin can preflight without credentials
// and read the answers; other origins get nothing.
func TestCORS(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.AllowedOrigins = []string{"https://app.example.com"}
		o.Tokens = []Token{{Token: "tok", Tenant: "acme"}}
	})
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, w.url+"/mcp", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, mcp-session-id")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := preflight("https://app.example.com")
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") {
		t.Errorf("preflight from the allowed origin: %s %v", res.Status, res.Header)
	}
	if res := preflight("https://evil.example.com"); res.StatusCode != http.StatusForbidden || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %s %v", res.Status, res.Header)
	}
	c := newRaw(t, nil, w.url+"/mcp")
	res, _ = c.do(http.MethodPost, initBody, "Origin", "https://app.example.com", "Authorization", "Bearer tok")
	if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
		t.Errorf("request from the allowed origin: %s %v", res.Status, res.Header)
	}
}

// TestSSEReconnectKeepsTheSession: an SSE client whose stream drops
// reconnects on its own (EventSource sends the last event id back, as the
// TypeScript SDK's does) and goes on posting without initialize. It must
// stay in the session initialize's instructions named, whose log and PII
// tokens it has, not land in a new one: the endpoint event carries the
// session id as its event id, and a reconnect naming a session of the same
// tenant that ended with its stream resumes it. Another tenant, or a
// session still live, gets a new one.
func TestSSEReconnectKeepsTheSession(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}, {Token: "tok-beta", Tenant: "beta"}}
	})
	// open starts an SSE stream and returns its session id, the event id
	// of its endpoint event, and what ends the stream.
	open := func(token, lastID string) (sid, eventID string, stop func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.url+endpoint.SSEPath, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		r := bufio.NewReader(res.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				cancel()
				t.Fatalf("reading the endpoint event: %v", err)
			}
			line = strings.TrimRight(line, "\r\n")
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				eventID = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				u, _ := url.Parse(v)
				return u.Query().Get("sessionId"), eventID, func() { cancel(); res.Body.Close() }
			}
		}
	}
	waitEnded := func(id string) {
		t.Helper()
		select {
		case sc := <-w.ended:
			if sc.Session != id {
				t.Fatalf("ended %+v, want %s", sc, id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the end of %s was not reported", id)
		}
	}

	first, eventID, stop := open("tok-acme", "")
	if eventID != first {
		t.Fatalf("endpoint event id %q, want the session id %q", eventID, first)
	}
	stop()
	waitEnded(first)
	again, _, stop := open("tok-acme", first)
	if again != first {
		t.Fatalf("reconnecting with Last-Event-ID %s got session %s, want the same", first, again)
	}
	if owner, ok := w.face.sessions.owner(again); !ok || owner != "acme" {
		t.Errorf("resumed session: owner %q, live %v", owner, ok)
	}
	// While it is live, a second stream naming it gets a session of its own.
	other, _, stopOther := open("tok-acme", first)
	if other == first {
		t.Error("a second stream took over a live session")
	}
	stopOther()
	waitEnded(other)
	stop()
	waitEnded(first)
	// Another tenant cannot resume acme's session.
	beta, _, stopBeta := open("tok-beta", first)
	if beta == first {
		t.Error("beta resumed acme's session")
	}
	stopBeta()
	waitEnded(beta)
}

// TestSSEUninitializedSessionSaysSo: a client whose SSE stream reconnected
// without sending the last event id (the TypeScript SDK's SSE transport
// drops it) posts into a new session it never initialized; its results
// then say which session they ran in and that tokens shown before are not
// restored there, instead of silently writing them back as they are.
func TestSSEUninitializedSessionSaysSo(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.url+endpoint.SSEPath, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	stream := bufio.NewReader(res.Body)
	next := func() string { // the next data line
		t.Helper()
		for {
			line, err := stream.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				return v
			}
		}
	}
	u, _ := url.Parse(next())
	sid := u.Query().Get("sessionId")
	post := func(body string) {
		t.Helper()
		res, err := http.Post(w.url+endpoint.MessagePath+"?sessionId="+sid, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	const run = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"print(6*7)"}}}`
	note := "This connection's session is " + sid + ", which it never initialized"
	post(fmt.Sprintf(run, 1))
	if got := next(); !strings.Contains(got, note) || !strings.Contains(got, "42") {
		t.Errorf("execute_code on an uninitialized SSE session: %s\nwant it to say %q", got, note)
	}
	post(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	next()
	post(fmt.Sprintf(run, 3))
	if got := next(); strings.Contains(got, "never initialized") || !strings.Contains(got, "42") {
		t.Errorf("execute_code once initialized: %s", got)
	}
}
