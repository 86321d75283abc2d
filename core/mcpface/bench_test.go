package mcpface

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
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
