package mcpface

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/client/mcpclient"
)

// BenchmarkExecuteCodeHTTP measures execute_code of print(1+1) over
// streamable HTTP on 127.0.0.1 with the real mcp-go client: JSON-RPC over
// HTTP, the face, the PII tokenizer and a fork of the standard runtime's
// zygote (here without a sandbox around it). It reports the p50 and p99 per
// call; the target for the whole daemon is a p50 of 5 ms.
func BenchmarkExecuteCodeHTTP(b *testing.B) {
	w := newWorld(b)
	c := connect(b, w.url+"/mcp")
	req := mcp.CallToolRequest{}
	req.Params.Name = ToolExecuteCode
	req.Params.Arguments = map[string]any{"code": "print(1+1)"}
	ctx := context.Background()
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := c.CallTool(ctx, req)
		times = append(times, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("execute_code: %v %+v", err, res)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(times[len(times)*99/100])/1e6, "p99-ms")
}

// BenchmarkSearchToolsHTTP measures a search_tools round trip.
func BenchmarkSearchToolsHTTP(b *testing.B) {
	w := newWorld(b)
	c := connect(b, w.url+"/mcp")
	req := mcp.CallToolRequest{}
	req.Params.Name = ToolSearchTools
	req.Params.Arguments = map[string]any{"query": "sum of two numbers"}
	ctx := context.Background()
	for b.Loop() {
		if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
			b.Fatalf("search_tools: %v %+v", err, res)
		}
	}
}

// TestBenchExecute runs the benchmark function `cexecctl bench mcp` uses
// and checks that it measures what it says (it does not judge the figures).
func TestBenchExecute(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) { o.Tokens = []Token{{Token: "tok", Tenant: "acme"}} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := mcpclient.BenchExecute(ctx, mcpclient.BenchOptions{URL: w.url + "/mcp", Token: "tok", N: 20, Warmup: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("execute_code print(1+1): %s", r)
	if r.N != 20 || r.Min <= 0 || r.Min > r.P50 || r.P50 > r.P90 || r.P90 > r.P99 || r.P99 > r.Max {
		t.Errorf("inconsistent result %s", r)
	}
	// A program whose output differs from Want fails the run.
	_, err = mcpclient.BenchExecute(ctx, mcpclient.BenchOptions{URL: w.url + "/mcp", Token: "tok", Code: "print(3)", Want: "4", N: 1, Warmup: 1})
	if err == nil {
		t.Error("a wrong output passed")
	}
	if _, err := mcpclient.BenchExecute(ctx, mcpclient.BenchOptions{URL: w.url + "/mcp", Token: "nope", N: 1}); err == nil {
		t.Error("a bad token passed")
	}
}
