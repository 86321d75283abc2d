package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testpeers"
)

// TestSecretsMaskedInResults: a server given a secret through env() that
// returns it (server-everything's get-env lists its environment) hands the
// caller "(sensitive)" in its place, in text and structured content, so the
// secret reaches no sandbox, session log or model.
func TestSecretsMaskedInResults(t *testing.T) {
	const token, quoted = "tok-3f9a1c77e2", `pa"ss\word-1234`
	t.Setenv("CEXEC_TEST_TOKEN", token)
	t.Setenv("CEXEC_TEST_QUOTED", quoted)
	dir := t.TempDir()
	path := filepath.Join(dir, "cexec.hcl")
	src := fmt.Sprintf(`cexec {
  data_dir = %q
}
mcp_server "everything" {
  command = %q
  args    = ["stdio"]
  env     = { API_TOKEN = env("CEXEC_TEST_TOKEN"), OTHER = "${env("CEXEC_TEST_QUOTED")}!", SHORT = env("NOPE_UNSET", "info") }
}
`, filepath.Join(dir, "data"), testpeers.Bin(t, "mcp-server-everything"))
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path, config.Overrides{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	c, err := New(cfg, Options{ServersDir: filepath.Join(dir, "servers"), Logger: testpeers.Logger(t, "catalog", hclog.Debug)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, "default", "everything", "get-env", nil)
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(mcp.TextContent).Text
	var env map[string]string
	if err := json.Unmarshal([]byte(text), &env); err != nil {
		t.Fatalf("get-env: %v: %s", err, text)
	}
	if env["API_TOKEN"] != "(sensitive)" || env["OTHER"] != "(sensitive)!" {
		t.Errorf("get-env shows API_TOKEN %q and OTHER %q, want them masked", env["API_TOKEN"], env["OTHER"])
	}
	if env["SHORT"] != "info" {
		t.Errorf("SHORT = %q: a value too short to be a secret was masked", env["SHORT"])
	}
	res, err = c.Call(ctx, "default", "everything", "echo", json.RawMessage(`{"message":"`+token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(mcp.TextContent).Text; strings.Contains(got, token) {
		t.Errorf("echo returned the secret: %q", got)
	}
}

// TestSecretsMaskedInErrorsAndTools: a server whose JSON-RPC error and
// tool description quote a secret (an mcp-go server over streamable HTTP)
// gives the caller, the catalog and the stub the program reads
// "(sensitive)" instead.
func TestSecretsMaskedInErrorsAndTools(t *testing.T) {
	const secret = "tok-8c1e5b2a9f"
	s := server.NewMCPServer("leaky", "1.0.0")
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Signs in with "+secret+".")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("the server rejected token %s", secret)
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(ts.Close)
	stubs := filepath.Join(t.TempDir(), "servers")
	cfg := &config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}, MCPServers: []*config.MCPServer{
		{Name: "leaky", Transport: config.TransportHTTP, URL: ts.URL + "/mcp", Timeout: 20 * time.Second}}}
	c, err := New(cfg, Options{ServersDir: stubs, Logger: testpeers.Logger(t, "catalog", hclog.Debug)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// As if the config had given the server the secret through env().
	c.mask.Store(newSecretMask([]string{secret}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(ctx, "default", "leaky", "fail", nil)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "rejected token (sensitive)") {
		t.Errorf("call error %v, want it masked", err)
	}
	tool, ok := c.Tool("leaky", "fail")
	if !ok || tool.Description != "Signs in with (sensitive)." {
		t.Errorf("catalog description %q", tool.Description)
	}
	stub, err := os.ReadFile(filepath.Join(stubs, "leaky", "fail.py"))
	if err != nil || strings.Contains(string(stub), secret) {
		t.Errorf("stub: %v\n%s", err, stub)
	}
}

// TestSecretsMaskedInNotices: an upstream's progress message and log
// message quoting a secret reach neither the call's notices (the agent, the
// session log) nor cexecd's log with it.
func TestSecretsMaskedInNotices(t *testing.T) {
	const secret = "s3cr3t-value-99"
	mask := newSecretMask([]string{secret})
	var buf strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	var got []string
	n := &CallNotices{
		Progress: func(_, _ string, _, _ float64, msg string) { got = append(got, msg) },
		Log:      func(m LogMessage) { got = append(got, m.Logger+" "+string(m.Data)) },
	}
	var w watches
	req := &mcp.CallToolRequest{}
	defer w.begin("s", "t", n, req)()
	progress := mcp.JSONRPCNotification{Notification: mcp.Notification{Method: string(mcp.MethodNotificationProgress)}}
	progress.Params.AdditionalFields = map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": 1.0, "message": "using " + secret}
	note := mcp.JSONRPCNotification{Notification: mcp.Notification{Method: string(mcp.MethodNotificationMessage)}}
	note.Params.AdditionalFields = map[string]any{"level": "info", "logger": secret, "data": map[string]any{"token": secret}}
	w.handle("s", log, mask, progress)
	w.handle("s", log, mask, note)
	all := strings.Join(got, "\n") + buf.String()
	if strings.Contains(all, secret) || len(got) != 2 || got[0] != "using (sensitive)" {
		t.Errorf("notices %q and log %q", got, buf.String())
	}
}

// TestSecretsMaskedInStderr: a server printing a secret on stderr does not
// put it in cexecd's log.
func TestSecretsMaskedInStderr(t *testing.T) {
	var buf strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	w := &lineLogger{log: log, mask: new(atomic.Pointer[secretMask])}
	w.mask.Store(newSecretMask([]string{"s3cr3t-value-99"}))
	fmt.Fprintf(w, "starting with token s3cr3t-value-99\n")
	if out := buf.String(); strings.Contains(out, "s3cr3t") || !strings.Contains(out, "starting with token (sensitive)") {
		t.Errorf("logged %q", out)
	}
}
