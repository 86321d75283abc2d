package catalog

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testpeers"
)

// TestBuiltinServer: a transport = "builtin" server is served in process,
// one instance per tenant, each built for its tenant; its raw schemas are
// kept as for any other server.
func TestBuiltinServer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cexec.hcl")
	src := "cexec {\n  data_dir = \"" + filepath.Join(dir, "data") + "\"\n}\nmcp_server \"forms\" {\n  transport = \"builtin\"\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path, config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	schema := `{"type":"object","description":"kept as sent","properties":{}}`
	var mu sync.Mutex
	built := map[string]bool{}
	whoami := func(tenant string) (*server.MCPServer, error) {
		mu.Lock()
		built[tenant] = true
		mu.Unlock()
		s := server.NewMCPServer("whoami", "1")
		s.AddTool(mcp.NewToolWithRawSchema("whoami", "says the tenant", json.RawMessage(schema)),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(tenant), nil
			})
		return s, nil
	}
	c, err := New(cfg, Options{Logger: testpeers.Logger(t, "catalog", hclog.Debug), ServersDir: filepath.Join(dir, "servers"),
		MinBackoff: 50 * time.Millisecond, Builtins: map[string]Builtin{"forms": whoami}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	tools := c.Tools()
	if len(tools) != 1 || tools[0].Name != "whoami" || string(tools[0].InputSchema) != schema {
		t.Fatalf("tools %+v", tools)
	}
	for _, tenant := range []string{"acme", "beta"} {
		res, err := c.Call(ctx, tenant, "forms", "whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(mcp.TextContent).Text; got != tenant {
			t.Errorf("tenant %s's instance answers %q", tenant, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !built["default"] || !built["acme"] || !built["beta"] {
		t.Errorf("instances built for %v", built)
	}
}
