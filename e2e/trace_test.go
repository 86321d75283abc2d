package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/cexec/cexec/api/endpoint"
)

// OpenTelemetry traces end to end: a real cexecd with the repository's
// plugins (bwrap sandbox, pii guard) exports over OTLP/gRPC to a receiver in
// the test (the collector's TraceService from the OTLP protos; a real
// OpenTelemetry Collector is not built here), and calls an upstream MCP
// server over streamable HTTP (mcp-go's server in an httptest server) that
// records the trace context it receives.

// otlpReceiver is an OTLP/gRPC trace receiver that keeps every span.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) trace(id string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if hex.EncodeToString(s.GetTraceId()) == id {
			out = append(out, s)
		}
	}
	return out
}

func startOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r, ln.Addr().String()
}

// tracePeer is an upstream MCP server over streamable HTTP that records
// the traceparent of each HTTP request and of each tools/call's _meta.
type tracePeer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []string
	metas   []string
}

func newTracePeer(t *testing.T) *tracePeer {
	t.Helper()
	p := &tracePeer{}
	srv := server.NewMCPServer("trace-peer", "1.0.0", server.WithToolCapabilities(false))
	srv.AddTool(mcp.NewTool("lookup", mcp.WithDescription("Look a word up."), mcp.WithString("q", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p.mu.Lock()
			if m := req.Params.Meta; m != nil {
				s, _ := m.AdditionalFields["traceparent"].(string)
				p.metas = append(p.metas, s)
			}
			p.mu.Unlock()
			return mcp.NewToolResultText("found " + req.GetString("q", "")), nil
		})
	h := server.NewStreamableHTTPServer(srv)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("traceparent"); tp != "" {
			p.mu.Lock()
			p.headers = append(p.headers, tp)
			p.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// traceIDs are the trace ids of the recorded traceparent values.
func (p *tracePeer) traceIDs() (headers, metas []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := func(tp string) string {
		if parts := strings.Split(tp, "-"); len(parts) == 4 {
			return parts[1]
		}
		return ""
	}
	for _, h := range p.headers {
		headers = append(headers, id(h))
	}
	for _, m := range p.metas {
		metas = append(metas, id(m))
	}
	return headers, metas
}

func stopDaemon(t *testing.T, d *daemon) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("cexecd did not stop\n%s", d.stderr)
	}
}

// The agent's own trace: the request arrives inside it (traceparent in
// _meta), so cexecd's spans must join it under this parent.
const (
	agentTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpanID  = "00f067aa0ba902b7"
	// traceSecret is an argument value no span may carry.
	traceSecret = "arg-value-7f3a9c"
)

// TestTracesExported runs one execute_code with a tool call over the MCP
// face of a traced cexecd and checks the trace the receiver got: the
// face's server span under the agent's span, the pipeline's stages under
// the execution, the plugin calls (otelgrpc), the tool call from code and
// its upstream MCP client span, and the HTTP upstream's traceparent (header
// and _meta) in the same trace. Then it prints what tracing costs a warm
// execution (cexecctl bench mcp, traced and not).
func TestTracesExported(t *testing.T) {
	recv, otlpAddr := startOTLPReceiver(t)
	peer := newTracePeer(t)
	s := newSetup(t)
	addr := mcpFreeAddr(t)
	appendConfig(t, s, fmt.Sprintf("\nmcp_server \"web\" {\n  url = %q\n}\n\nmcp {\n  listen = %q\n}\n", peer.URL+"/mcp", addr))
	untraced, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	appendConfig(t, s, fmt.Sprintf("\ntelemetry {\n  traces {\n    endpoint = %q\n    protocol = \"grpc\"\n  }\n}\n", otlpAddr))
	d := startDaemon(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.NewStreamableHttpClient("http://" + addr + endpoint.MCPPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cexec-e2e-trace", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "execute_code"
	req.Params.Arguments = map[string]any{"code": "from servers.web import lookup\nprint(lookup(q=" + fmt.Sprintf("%q", traceSecret) + "))\n"}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + agentTraceID + "-" + agentSpanID + "-01"}}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(mcpText(res), "found "+traceSecret) {
		t.Fatalf("execute_code: %s", mcpText(res))
	}
	_ = c.Close()
	// Stopping flushes the batched spans.
	stopDaemon(t, d)

	spans := recv.trace(agentTraceID)
	byName := map[string]*tracepb.Span{}
	var names []string
	for _, sp := range spans {
		names = append(names, sp.GetName())
		if _, dup := byName[sp.GetName()]; !dup {
			byName[sp.GetName()] = sp
		}
		for _, a := range sp.GetAttributes() {
			if strings.Contains(a.GetValue().String(), traceSecret) {
				t.Errorf("span %s carries the tool argument in %s", sp.GetName(), a.GetKey())
			}
		}
		if strings.Contains(sp.GetStatus().GetMessage(), traceSecret) {
			t.Errorf("span %s carries the tool argument in its status", sp.GetName())
		}
	}
	t.Logf("%d spans in trace %s: %v", len(spans), agentTraceID, names)
	span := func(name string) *tracepb.Span {
		t.Helper()
		sp := byName[name]
		if sp == nil {
			t.Fatalf("no span %q in the trace; got %v", name, names)
		}
		return sp
	}
	id := func(b []byte) string { return hex.EncodeToString(b) }
	parentIs := func(child, parent *tracepb.Span) {
		t.Helper()
		if id(child.GetParentSpanId()) != id(parent.GetSpanId()) {
			t.Errorf("span %s: parent %s, want %s (%s)", child.GetName(), id(child.GetParentSpanId()), id(parent.GetSpanId()), parent.GetName())
		}
	}
	attr := func(sp *tracepb.Span, key string) string {
		for _, a := range sp.GetAttributes() {
			if a.GetKey() == key {
				return a.GetValue().GetStringValue()
			}
		}
		return ""
	}

	face := span("tools/call execute_code")
	if id(face.GetParentSpanId()) != agentSpanID || face.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("face span: parent %s kind %v, want the agent's span %s, server", id(face.GetParentSpanId()), face.GetKind(), agentSpanID)
	}
	if attr(face, "mcp.method.name") != "tools/call" || attr(face, "gen_ai.tool.name") != "execute_code" || attr(face, "cexec.tenant") != endpoint.DefaultTenant {
		t.Errorf("face span attributes: %v", face.GetAttributes())
	}
	exec := span("execute_code")
	parentIs(exec, face)
	for _, stage := range []string{"guard.before", "pool.lease", "sandbox.exec", "guard.after", "session.log"} {
		parentIs(span(stage), exec)
	}
	run := span("sandbox.exec")
	call := span("call_tool web/lookup")
	parentIs(call, run)
	if attr(call, "cexec.outcome") != "ok" || attr(call, "cexec.server") != "web" || attr(call, "gen_ai.tool.name") != "lookup" {
		t.Errorf("tool call span attributes: %v", call.GetAttributes())
	}
	upstream := span("tools/call lookup")
	parentIs(upstream, call)
	if upstream.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || attr(upstream, "mcp.method.name") != "tools/call" {
		t.Errorf("upstream span: kind %v attributes %v", upstream.GetKind(), upstream.GetAttributes())
	}
	// The plugin calls, from otelgrpc on the plugins' connections. The
	// program itself runs without the bwrap plugin on its way (cexecd
	// controls the zygote through the sandbox's socket).
	plugin := span("cexec.plugin.guard.v1.Guard/CheckCode")
	parentIs(plugin, span("guard.before"))
	if plugin.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("plugin span kind %v", plugin.GetKind())
	}
	var guardCall bool
	for _, n := range names {
		guardCall = guardCall || strings.HasPrefix(n, "cexec.plugin.guard.v1.")
	}
	if !guardCall {
		t.Errorf("no guard plugin call in the trace: %v", names)
	}
	// The HTTP client span under the MCP client span, and what the
	// upstream received.
	var httpSpan *tracepb.Span
	for _, sp := range spans {
		if id(sp.GetParentSpanId()) == id(upstream.GetSpanId()) && sp.GetKind() == tracepb.Span_SPAN_KIND_CLIENT {
			httpSpan = sp
		}
	}
	if httpSpan == nil {
		t.Errorf("no HTTP client span under %s", upstream.GetName())
	}
	headers, metas := peer.traceIDs()
	if !slices.Contains(headers, agentTraceID) {
		t.Errorf("the upstream got no traceparent header in trace %s: %v", agentTraceID, headers)
	}
	if !slices.Contains(metas, agentTraceID) {
		t.Errorf("the upstream's tools/call had no traceparent in _meta in trace %s: %v", agentTraceID, metas)
	}

	t.Run("overhead", func(t *testing.T) {
		traced, err := os.ReadFile(s.config)
		if err != nil {
			t.Fatal(err)
		}
		// Alternating rounds, so that whatever else the machine runs
		// weighs on both alike.
		bench := func(on bool) float64 {
			cfg, label := untraced, "off"
			if on {
				cfg, label = traced, "on"
			}
			if err := os.WriteFile(s.config, cfg, 0o600); err != nil {
				t.Fatal(err)
			}
			d := startDaemon(t, s)
			out := mustCtl(t, s, "bench", "mcp", "--json", "--n", "100", "--warmup", "10")
			stopDaemon(t, d)
			var r struct {
				P50Ms float64 `json:"p50_ms"`
				P99Ms float64 `json:"p99_ms"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("bench mcp --json: %v\n%s", err, out)
			}
			t.Logf("warm execute_code print(1+1) over the MCP socket, tracing %s: p50 %.2f ms, p99 %.2f ms (n=100)", label, r.P50Ms, r.P99Ms)
			return r.P50Ms
		}
		var on, off []float64
		for range 3 {
			off = append(off, bench(false))
			on = append(on, bench(true))
		}
		slices.Sort(on)
		slices.Sort(off)
		t.Logf("tracing on vs off, best p50 of 3 rounds: on %.2f ms, off %.2f ms: %+.2f ms per warm execution", on[0], off[0], on[0]-off[0])
	})
}
