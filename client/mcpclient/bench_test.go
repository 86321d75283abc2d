package mcpclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/api/endpoint"
)

// startServer serves an independent MCP server (mcp-go's streamable HTTP
// server) with the face's execute_code tool, running programs in
// /usr/bin/python3, behind a bearer token as the face's TCP listener is.
// The face itself is tested in core/mcpface; this tests the benchmark.
func startServer(t *testing.T, token string, persistent *atomic.Int64) string {
	t.Helper()
	s := server.NewMCPServer("bench-test", "1")
	s.AddTool(mcp.NewTool("execute_code", mcp.WithString("code", mcp.Required()), mcp.WithBoolean("persistent")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.GetBool("persistent", false) {
				persistent.Add(1)
			}
			out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", req.GetString("code", "")).Output()
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(string(out)), nil
		})
	h := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + endpoint.MCPPath
}

// TestBenchExecute checks that the benchmark `cexecctl bench mcp` runs
// measures what it says (it does not judge the figures) and fails on a
// wrong output or a refused token.
func TestBenchExecute(t *testing.T) {
	var persistent atomic.Int64
	url := startServer(t, "tok", &persistent)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := BenchExecute(ctx, BenchOptions{URL: url, Token: "tok", N: 20, Warmup: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("execute_code print(1+1): %s", r)
	if r.N != 20 || r.Min <= 0 || r.Min > r.P50 || r.P50 > r.P90 || r.P90 > r.P99 || r.P99 > r.Max {
		t.Errorf("inconsistent result %s", r)
	}
	if persistent.Load() != 0 {
		t.Errorf("%d calls asked for a persistent interpreter, want none", persistent.Load())
	}
	if _, err := BenchExecute(ctx, BenchOptions{URL: url, Token: "tok", N: 3, Warmup: 1, Persistent: true}); err != nil {
		t.Fatal(err)
	}
	if persistent.Load() != 4 {
		t.Errorf("%d of 4 calls asked for a persistent interpreter", persistent.Load())
	}
	// Paced: each measured call waits first, warm-up calls do not.
	var paused []time.Duration
	defer func(p func(context.Context, time.Duration) error) { pause = p }(pause)
	pause = func(_ context.Context, d time.Duration) error {
		paused = append(paused, d)
		return nil
	}
	if _, err := BenchExecute(ctx, BenchOptions{URL: url, Token: "tok", N: 3, Warmup: 2, Pace: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}; !slices.Equal(paused, want) {
		t.Errorf("3 measured calls after 2 warm-up ones paused %v, want %v", paused, want)
	}
	// The program stands in for cexec's warning line.
	if _, err := BenchExecute(ctx, BenchOptions{URL: url, Token: "tok", Code: "print('[cexec: interpreter ended]\\n2')", Want: "2\n", N: 1, Warmup: 1}); err != nil {
		t.Errorf("a warning before the output failed the call: %v", err)
	}
	if _, err := BenchExecute(ctx, BenchOptions{URL: url, Token: "tok", Code: "print('[cexec: interpreter ended]\\n3')", Want: "2\n", N: 1, Warmup: 1}); err == nil {
		t.Error("a wrong output after a warning passed")
	}
	if _, err := BenchExecute(ctx, BenchOptions{URL: url, Token: "tok", Code: "print(3)", Want: "4", N: 1, Warmup: 1}); err == nil {
		t.Error("a wrong output passed")
	}
	if _, err := BenchExecute(ctx, BenchOptions{URL: url, Token: "nope", N: 1}); err == nil {
		t.Error("a bad token passed")
	}
}
