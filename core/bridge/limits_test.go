package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/catalog"
)

// countingCatalog is a fixedCatalog that counts the calls reaching the
// upstream.
type countingCatalog struct {
	fixedCatalog
	calls atomic.Int64
}

func (c *countingCatalog) Call(ctx context.Context, tenant, server, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	c.calls.Add(1)
	return c.fixedCatalog.Call(ctx, tenant, server, tool, args)
}

// TestCallLimits checks the caps of one call's arguments and result: an
// argument over the cap never reaches the upstream (nor the Before hook,
// where guards would scan it), a result over it fails the call, and a
// server's own caps override the defaults.
func TestCallLimits(t *testing.T) {
	arg := func(n int) json.RawMessage {
		return json.RawMessage(`{"query":"` + strings.Repeat("x", n-len(`{"query":""}`)) + `"}`)
	}
	text := func(n int) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent{Type: "text", Text: strings.Repeat("y", n)}}}
	}
	structured := func(n int) *mcp.CallToolResult {
		return &mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{"v":"` + strings.Repeat("z", n-len(`{"v":""}`)) + `"}`),
			Content: []mcp.Content{mcp.TextContent{Type: "text", Text: "short"}}}
	}
	tests := []struct {
		name     string
		limits   Limits
		args     json.RawMessage
		res      *mcp.CallToolResult
		wantType string // "" for success
		wantMsg  string
		upstream int64
	}{
		{"small call", Limits{}, arg(100), text(100), "", "", 1},
		{"argument at the default cap", Limits{}, arg(DefaultMaxArgument), text(10), "", "", 1},
		{"12 MiB argument over the default cap", Limits{}, arg(12 << 20), text(10), TypeArgumentTooLarge,
			"memory/search_nodes was not called: its arguments are 12 MiB, over the limit of 1 MiB per call (max_argument_size)", 0},
		{"configured cap", Limits{Default: CallLimits{MaxArgument: 4096}}, arg(4097), text(10), TypeArgumentTooLarge, "over the limit of 4 KiB per call", 0},
		{"server override raises the cap", Limits{Default: CallLimits{MaxArgument: 4096}, Servers: map[string]CallLimits{"memory": {MaxArgument: 8192}}},
			arg(8000), text(10), "", "", 1},
		{"server override lowers the cap", Limits{Servers: map[string]CallLimits{"memory": {MaxArgument: 100}}}, arg(101), text(10), TypeArgumentTooLarge, "limit of 100 bytes", 0},
		{"other server's override does not apply", Limits{Servers: map[string]CallLimits{"other": {MaxArgument: 100}}}, arg(1000), text(10), "", "", 1},
		{"text result over the default cap", Limits{}, arg(100), text(DefaultMaxResult + 1), TypeResultTooLarge,
			"memory/search_nodes returned 16.0 MiB, over the limit of 16 MiB per call (max_result_size)", 1},
		{"structured result over a server's cap", Limits{Servers: map[string]CallLimits{"memory": {MaxResult: 1000}}}, arg(100), structured(1001), TypeResultTooLarge,
			"returned 1001 bytes, over the limit of 1000 bytes", 1},
		{"structured result at a server's cap", Limits{Servers: map[string]CallLimits{"memory": {MaxResult: 1000}}}, arg(100), structured(1000), "", "", 1},
	}
	tool := catalog.Tool{ID: "memory/search_nodes", Server: "memory", Name: "search_nodes", Hash: "h"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := &countingCatalog{fixedCatalog: fixedCatalog{tool: tool, res: tt.res}}
			var before atomic.Int64
			e := New(cat, nil, tt.limits).NewExecution(ExecOptions{Before: func(_ context.Context, _, _ string, args json.RawMessage) (json.RawMessage, error) {
				before.Add(1)
				return args, nil
			}})
			_, err := e.CallTool(context.Background(), "memory", "search_nodes", tt.args)
			if tt.wantType == "" {
				if err != nil {
					t.Fatalf("call failed: %v", err)
				}
			} else if ce := callErr(t, err); ce.Type != tt.wantType || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("error %s: %s\nwant %s: ...%s...", ce.Type, ce.Message, tt.wantType, tt.wantMsg)
			}
			if got := cat.calls.Load(); got != tt.upstream {
				t.Errorf("upstream called %d times, want %d", got, tt.upstream)
			}
			if tt.upstream == 0 && before.Load() != 0 {
				t.Error("an oversized argument reached the Before hook")
			}
		})
	}
}
