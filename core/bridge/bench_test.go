package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testpeers"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
)

var (
	benchSeed = json.RawMessage(`{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]},{"name":"Grace","entityType":"person","observations":["found a moth"]}]}`)
	benchArgs = json.RawMessage(`{"query":"Ada"}`)
)

// memoryBridge is a bridge over a catalog holding only server-memory, and
// the directory holding its generated servers package.
func memoryBridge(b *testing.B) (*Bridge, string) {
	bin := testpeers.Bin(b, "mcp-server-memory")
	cfg := &config.Config{Daemon: config.Daemon{DataDir: b.TempDir()}, MCPServers: []*config.MCPServer{{
		Name: "memory", Transport: config.TransportStdio, Command: bin,
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(b.TempDir(), "memory.jsonl")}, Timeout: 30 * time.Second,
	}}}
	stubs := filepath.Join(b.TempDir(), "servers")
	cat, err := catalog.New(cfg, catalog.Options{Logger: testpeers.Logger(b, "", hclog.Warn), ServersDir: stubs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cat.Close() })
	if err := cat.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	br := New(cat, nil, Limits{})
	if _, err := br.CallTool(context.Background(), "default", "memory", "create_entities", benchSeed); err != nil {
		b.Fatal(err)
	}
	return br, filepath.Dir(stubs)
}

// directMemory starts another server-memory process behind a plain mcp-go
// client and returns a function calling it.
func directMemory(b *testing.B) func(name string, args json.RawMessage) {
	ctx := context.Background()
	direct := client.NewClient(transport.NewStdio(testpeers.Bin(b, "mcp-server-memory"), []string{"MEMORY_FILE_PATH=" + filepath.Join(b.TempDir(), "memory.jsonl")}))
	if err := direct.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = direct.Close() })
	if _, err := direct.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "bench"}}}); err != nil {
		b.Fatal(err)
	}
	return func(name string, args json.RawMessage) {
		if _, err := direct.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallToolOverhead compares bridge.CallTool with a direct mcp-go
// client call to another server-memory process holding the same graph,
// alternating the two, and reports both medians and their difference.
func BenchmarkCallToolOverhead(b *testing.B) {
	br, _ := memoryBridge(b)
	ctx := context.Background()

	call := directMemory(b)
	call("create_entities", benchSeed)

	// Warm both paths (schema compilation, JIT in the servers).
	for range 50 {
		call("search_nodes", benchArgs)
		if _, err := br.CallTool(ctx, "default", "memory", "search_nodes", benchArgs); err != nil {
			b.Fatal(err)
		}
	}
	n := max(b.N, 200)
	directT, bridgeT := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		t0 := time.Now()
		call("search_nodes", benchArgs)
		t1 := time.Now()
		if _, err := br.CallTool(ctx, "default", "memory", "search_nodes", benchArgs); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		directT = append(directT, t1.Sub(t0))
		bridgeT = append(bridgeT, t2.Sub(t1))
	}
	b.StopTimer()
	d, br50 := median(directT), median(bridgeT)
	b.ReportMetric(ms(d), "direct_p50_ms")
	b.ReportMetric(ms(br50), "bridge_p50_ms")
	b.ReportMetric(ms(br50-d), "overhead_p50_ms")
	b.Logf("%d calls each: direct p50 %.3f ms, bridge p50 %.3f ms, overhead p50 %.3f ms (target <= 0.5 ms)", n, ms(d), ms(br50), ms(br50-d))
}

// BenchmarkLoop1000 makes 1,000 sequential bridge calls within one
// Execution against server-memory, and as a baseline 1,000 direct mcp-go
// client calls to another server-memory process.
func BenchmarkLoop1000(b *testing.B) {
	br, _ := memoryBridge(b)
	call := directMemory(b)
	call("create_entities", benchSeed)
	ctx := context.Background()
	for range 100 { // warm both servers' JITs
		call("search_nodes", benchArgs)
		if _, err := br.CallTool(ctx, "default", "memory", "search_nodes", benchArgs); err != nil {
			b.Fatal(err)
		}
	}
	var total, direct time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		for range 1000 {
			call("search_nodes", benchArgs)
		}
		direct += time.Since(t0)
		e := br.NewExecution(ExecOptions{})
		t0 = time.Now()
		for range 1000 {
			if _, err := e.CallTool(ctx, "memory", "search_nodes", benchArgs); err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(t0)
		if s := e.Summary(); s.Calls != 1000 || s.Failed != 0 {
			b.Fatalf("summary %+v", s)
		}
	}
	b.ReportMetric(ms(total)/float64(b.N), "loop_1000_ms")
	b.ReportMetric(ms(direct)/float64(b.N), "direct_loop_1000_ms")
	b.Logf("1,000 sequential calls: bridge %.1f ms, direct mcp-go client %.1f ms (target <= 1000 ms)", ms(total)/float64(b.N), ms(direct)/float64(b.N))
}

// BenchmarkLoop1000Python makes the 1,000 calls from one Python program
// through the standard runtime and the generated stubs, as sandboxed code
// does (without a sandbox backend's isolation around the zygote).
func BenchmarkLoop1000Python(b *testing.B) {
	br, stubRoot := memoryBridge(b)
	r := startZygote(b, stubRoot)
	code := `
import time
from servers.memory import search_nodes
t0 = time.perf_counter()
for _ in range(1000):
    search_nodes(query="Ada")
print(round((time.perf_counter() - t0) * 1000, 1))
`
	var total float64
	b.ResetTimer()
	for range b.N {
		_, h := run(b, r, br, code)
		v, err := strconv.ParseFloat(strings.TrimSpace(h.Stdout()), 64)
		if err != nil {
			b.Fatalf("program printed %q", h.Stdout())
		}
		if s := h.exec.Summary(); s.Calls != 1000 || s.Failed != 0 {
			b.Fatalf("summary %+v", s)
		}
		total += v
	}
	b.ReportMetric(total/float64(b.N), "loop_1000_ms")
	b.Logf("1,000 call_tool from Python in one execution: %.1f ms (target <= 1000 ms)", total/float64(b.N))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fixedCatalog answers every call with the same result, so a benchmark
// over it measures the bridge's own work: lookup, validation, decoding,
// recording.
type fixedCatalog struct {
	tool catalog.Tool
	res  *mcp.CallToolResult
}

func (f *fixedCatalog) Tool(server, name string) (catalog.Tool, bool) {
	return f.tool, server == f.tool.Server && name == f.tool.Name
}
func (f *fixedCatalog) Tools() []catalog.Tool { return []catalog.Tool{f.tool} }
func (f *fixedCatalog) Server(string) (catalog.ServerStatus, bool) {
	return catalog.ServerStatus{State: catalog.StateReady}, true
}
func (f *fixedCatalog) Call(context.Context, string, string, string, json.RawMessage) (*mcp.CallToolResult, error) {
	return f.res, nil
}

// BenchmarkBridgeOwnWork is the per-call cost of the bridge itself, with
// server-memory's real search_nodes schema and a structured result.
func BenchmarkBridgeOwnWork(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(b), "core", "catalog", "stubgen", "testdata", "refservers", "server-memory-2026.8.31.json"))
	if err != nil {
		b.Fatal(err)
	}
	var fixture struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		b.Fatal(err)
	}
	var tool catalog.Tool
	for _, t := range fixture.Tools {
		if t.Name == "search_nodes" {
			tool = catalog.Tool{ID: "memory/search_nodes", Server: "memory", Name: t.Name, InputSchema: t.InputSchema, Hash: "h"}
		}
	}
	br := New(&fixedCatalog{tool: tool, res: &mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{"entities":[],"relations":[]}`)}}, nil, Limits{})
	e := br.NewExecution(ExecOptions{MaxCalls: b.N + 1})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := e.CallTool(ctx, "memory", "search_nodes", benchArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeResult measures turning an upstream result into the
// program's value: a JSON text (today's common case, which must not slow
// down), an object escaped because it looks like an envelope, and a rich
// result with a 4 KiB image.
func BenchmarkDecodeResult(b *testing.B) {
	img := base64.StdEncoding.EncodeToString(make([]byte, 4096))
	for _, bc := range []struct {
		name string
		res  mcp.CallToolResult
	}{
		{"json-text", mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(`{"rows":[1,2,3],"next":"abc"}`)}}},
		{"escaped", mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(`{"$cexec.value":1}`)}}},
		{"image-4KiB", mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a tiny image"), mcp.NewImageContent(img, "image/png")}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := decodeResult(&bc.res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
