package catalog

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/config"
)

// The test binary doubles as an MCP server written with mcp-go's server
// package (a second, independent implementation next to the TypeScript
// reference servers): one that adds and removes tools at runtime, which the
// reference servers cannot be asked to do.
const serveEnv = "CEXEC_CATALOG_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		if err := server.ServeStdio(dynamicServer()); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// addedSchema is the input schema of tools added at runtime: raw, with
// keywords mcp-go's typed schema drops.
const addedSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","description":"added at runtime","properties":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false}`

// dynamicServer offers add_tool and remove_tool, which change its own tool
// list (and so send notifications/tools/list_changed).
func dynamicServer() *server.MCPServer {
	s := server.NewMCPServer("dynamic", "1.0.0", server.WithToolCapabilities(true))
	nameArg := mcp.WithString("name", mcp.Required())
	s.AddTool(mcp.NewTool("add_tool", mcp.WithDescription("Add a tool."), nameArg), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name := req.GetString("name", "")
		s.AddTool(mcp.Tool{Name: name, Description: "A tool added at runtime.", RawInputSchema: json.RawMessage(addedSchema)},
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(name + " ran"), nil
			})
		return mcp.NewToolResultText("added " + name), nil
	})
	s.AddTool(mcp.NewTool("remove_tool", mcp.WithDescription("Remove a tool."), nameArg), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.DeleteTools(req.GetString("name", ""))
		return mcp.NewToolResultText("removed"), nil
	})
	return s
}

func dynamicStdio(t *testing.T) *config.MCPServer {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &config.MCPServer{Name: "dyn", Transport: config.TransportStdio, Command: exe, Args: []string{"-test.run=^$"},
		Env: map[string]string{serveEnv: "1"}, Timeout: 20 * time.Second}
}

// changes collects what a subscriber receives.
type changes struct {
	mu  sync.Mutex
	all []Change
}

func (c *changes) add(ch Change) {
	c.mu.Lock()
	c.all = append(c.all, ch)
	c.mu.Unlock()
}

func (c *changes) find(f func(Change) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.all, f)
}

func upserted(id string) func(Change) bool {
	return func(ch Change) bool {
		return !ch.Reset && slices.ContainsFunc(ch.Upserts, func(t Tool) bool { return t.ID == id })
	}
}

func deleted(id string) func(Change) bool {
	return func(ch Change) bool { return slices.Contains(ch.Deletes, id) }
}

// testToolChanges drives a dynamic server through c: a tool added upstream
// reaches subscribers (with its raw schema and its stub on disk), a tool
// removed upstream is deleted.
func testToolChanges(t *testing.T, c *Catalog, stubs, server string) {
	var got changes
	cancel := c.Subscribe(got.add)
	defer cancel()
	eventually(t, "the initial reset", 5*time.Second, func() bool {
		return got.find(func(ch Change) bool { return ch.Reset && len(ch.Upserts) >= 2 })
	})

	ctx := context.Background()
	if _, err := c.Call(ctx, "default", server, "add_tool", json.RawMessage(`{"name":"late-comer"}`)); err != nil {
		t.Fatal(err)
	}
	id := server + "/late-comer"
	eventually(t, "the upsert of "+id, 10*time.Second, func() bool { return got.find(upserted(id)) })
	tool, ok := c.Tool(server, "late-comer")
	if !ok || string(tool.InputSchema) != addedSchema {
		t.Fatalf("tool %v: schema %s", ok, tool.InputSchema)
	}
	if _, err := os.Stat(filepath.Join(stubs, "dyn", "late_comer.py")); err != nil {
		t.Errorf("stub of the new tool: %v", err)
	}
	if st, _ := c.Server(server); st.ListChanged == 0 {
		t.Errorf("ListChanged = 0 after a change: %+v", st)
	}

	if _, err := c.Call(ctx, "default", server, "remove_tool", json.RawMessage(`{"name":"late-comer"}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delete of "+id, 10*time.Second, func() bool { return got.find(deleted(id)) })
	if _, ok := c.Tool(server, "late-comer"); ok {
		t.Error("removed tool still in the catalog")
	}
	if _, err := os.Stat(filepath.Join(stubs, "dyn", "late_comer.py")); !os.IsNotExist(err) {
		t.Errorf("stub of the removed tool: %v", err)
	}
}

func TestToolListChangesStdio(t *testing.T) {
	stubs := filepath.Join(t.TempDir(), "servers")
	c := start(t, Options{ServersDir: stubs}, dynamicStdio(t))
	st, _ := c.Server("dyn")
	t.Logf("mcp-go server over stdio: protocol %s", st.ProtocolVersion)
	testToolChanges(t, c, stubs, "dyn")
}

func TestToolListChangesHTTP(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	h := server.NewStreamableHTTPServer(dynamicServer())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // registered before start: cleanups run last-in first-out, so the catalog closes first

	stubs := filepath.Join(t.TempDir(), "servers")
	c := start(t, Options{ServersDir: stubs}, &config.MCPServer{Name: "dyn", Transport: config.TransportHTTP, URL: ts.URL + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer s3cret"}, Timeout: 20 * time.Second})
	st, _ := c.Server("dyn")
	t.Logf("mcp-go server over streamable HTTP: protocol %s", st.ProtocolVersion)
	if st.State != StateReady {
		t.Fatalf("status %+v", st)
	}
	testToolChanges(t, c, stubs, "dyn")

	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 || slices.ContainsFunc(auth, func(a string) bool { return a != "Bearer s3cret" }) {
		t.Errorf("Authorization headers seen by the server: %q", auth)
	}
}
