package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/cexec/cexec/core/config"
)

func TestOffIsNoop(t *testing.T) {
	setup(t, nil)
	if Enabled() {
		t.Fatal("tracing on without a traces block")
	}
	ctx := context.Background()
	got, span := Start(ctx, "x")
	if got != ctx || span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("Start changed the context or recorded while off")
	}
	if GRPCClientHandler() != nil || HTTPClient() != nil {
		t.Error("instrumentation installed while off")
	}
	if InjectMeta(ctx, nil) != nil {
		t.Error("InjectMeta made a _meta while off")
	}
	allocs := testing.AllocsPerRun(100, func() {
		ctx, span := StartExecution(ctx, "execute_code", "acme", "s1")
		_, call := StartToolCall(ctx, "acme", "web", "lookup")
		EndOutcome(call, "")
		End(span, nil)
	})
	if allocs != 0 {
		t.Errorf("spans allocate %v times per execution while off", allocs)
	}
}

func TestSDKDisabled(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	setup(t, &config.Traces{Endpoint: "127.0.0.1:1", SampleRatio: 1})
	if Enabled() {
		t.Error("OTEL_SDK_DISABLED=true left tracing on")
	}
}

// TestExportGRPC exports one request's spans over OTLP/gRPC and checks
// names, kinds, parents and attributes, and that the trace context the
// client sent in _meta is the parent.
func TestExportGRPC(t *testing.T) {
	recv, addr := grpcReceiver(t)
	stop := setup(t, &config.Traces{Endpoint: addr, Protocol: "grpc", SampleRatio: 1})
	if !Enabled() {
		t.Fatal("tracing off")
	}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	meta := &mcp.Meta{AdditionalFields: map[string]any{"traceparent": parent}}
	ctx, face := StartMCPServer(context.Background(), MethodToolsCall, "execute_code", "sess-1", meta, nil)
	SetScope(ctx, "acme", "s1")
	ctx, exec := StartExecution(ctx, "execute_code", "acme", "s1")
	_, lease := Start(ctx, SpanLease)
	End(lease, errors.New("pool full"))
	cctx, call := StartToolCall(ctx, "acme", "web", "lookup")
	uctx, up := StartMCPClient(cctx, "web", "http", MethodToolsCall, "lookup")
	out := InjectMeta(uctx, nil)
	EndMCP(up, true, nil)
	EndOutcome(call, "ToolError")
	exec.End()
	EndMCP(face, false, nil)
	stop()

	spans := recv.names()
	for _, n := range []string{"tools/call execute_code", "execute_code", SpanLease, "call_tool web/lookup", "tools/call lookup"} {
		if spans[n] == nil {
			t.Fatalf("no span %q; got %v", n, spans)
		}
	}
	f := spans["tools/call execute_code"]
	if hexID(f.GetTraceId()) != "4bf92f3577b34da6a3ce929d0e0e4736" || hexID(f.GetParentSpanId()) != "00f067aa0ba902b7" {
		t.Errorf("face span not under the client's: trace %x parent %x", f.GetTraceId(), f.GetParentSpanId())
	}
	if f.GetKind() != tracepb.Span_SPAN_KIND_SERVER || attr(f, "mcp.method.name") != "tools/call" || attr(f, "gen_ai.tool.name") != "execute_code" ||
		attr(f, "mcp.session.id") != "sess-1" || attr(f, AttrTenant) != "acme" || attr(f, "gen_ai.operation.name") != "execute_tool" {
		t.Errorf("face span: %v %v", f.GetKind(), f.GetAttributes())
	}
	if l := spans[SpanLease]; l.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || l.GetStatus().GetMessage() != "pool full" {
		t.Errorf("lease status: %v", l.GetStatus())
	}
	c := spans["call_tool web/lookup"]
	if attr(c, AttrOutcome) != "ToolError" || attr(c, "error.type") != "ToolError" || attr(c, AttrServer) != "web" {
		t.Errorf("tool call span: %v", c.GetAttributes())
	}
	u := spans["tools/call lookup"]
	if u.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || attr(u, "error.type") != "tool_error" || attr(u, "network.transport") != "tcp" ||
		hexID(u.GetParentSpanId()) != hexID(c.GetSpanId()) {
		t.Errorf("upstream span: %v %v", u.GetKind(), u.GetAttributes())
	}
	tp, _ := out.AdditionalFields["traceparent"].(string)
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + hexID(u.GetSpanId()) + "-01"; tp != want {
		t.Errorf("_meta traceparent = %q, want %q", tp, want)
	}
	if Enabled() {
		t.Error("still on after shutdown")
	}
}

// TestExportHTTP exports over OTLP/HTTP protobuf with a configured header,
// with the endpoint as a URL.
func TestExportHTTP(t *testing.T) {
	recv, url := httpReceiver(t)
	stop := setup(t, &config.Traces{Endpoint: url, Protocol: "http", SampleRatio: 1, Headers: map[string]string{"x-api-key": "k1"}})
	_, span := StartExecution(context.Background(), "execute_code", "acme", "")
	span.End()
	stop()
	if recv.names()["execute_code"] == nil {
		t.Fatalf("no span exported over HTTP: %v", recv.got())
	}
	if recv.headers[0]["x-api-key"] != "k1" {
		t.Errorf("export headers: %v", recv.headers)
	}
}

// TestTraceparentHeaderFallback: a request without _meta joins the trace
// of its HTTP traceparent header.
func TestTraceparentHeaderFallback(t *testing.T) {
	recv, addr := grpcReceiver(t)
	stop := setup(t, &config.Traces{Endpoint: addr, SampleRatio: 1})
	h := http.Header{}
	h.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	_, span := StartMCPServer(context.Background(), MethodToolsCall, "search_tools", "", nil, h)
	EndMCP(span, false, nil)
	stop()
	s := recv.names()["tools/call search_tools"]
	if s == nil || hexID(s.GetTraceId()) != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("span not in the header's trace: %v", s)
	}
}

func TestRequestSampler(t *testing.T) {
	sampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled}))
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))
	tests := []struct {
		name  string
		ratio float64
		ctx   context.Context
		kind  trace.SpanKind
		want  sdktrace.SamplingDecision
	}{
		{"new request", 1, context.Background(), trace.SpanKindServer, sdktrace.RecordAndSample},
		{"new execution", 1, context.Background(), trace.SpanKindInternal, sdktrace.RecordAndSample},
		{"background plugin call", 1, context.Background(), trace.SpanKindClient, sdktrace.Drop},
		{"ratio 0", 0, context.Background(), trace.SpanKindServer, sdktrace.Drop},
		{"sampled parent", 0, sampled, trace.SpanKindClient, sdktrace.RecordAndSample},
		{"unsampled parent", 1, unsampled, trace.SpanKindInternal, sdktrace.Drop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := requestSampler{root: sdktrace.TraceIDRatioBased(tt.ratio)}
			got := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: tt.ctx, TraceID: trace.TraceID{2}, Kind: tt.kind})
			if got.Decision != tt.want {
				t.Errorf("decision %v, want %v", got.Decision, tt.want)
			}
		})
	}
	if !strings.HasPrefix(requestSampler{root: sdktrace.AlwaysSample()}.Description(), "RequestSampler") {
		t.Error("description")
	}
}

func TestInsecure(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		tc   config.Traces
		want bool
	}{
		{config.Traces{Endpoint: "127.0.0.1:4317"}, true},
		{config.Traces{Endpoint: "[::1]:4317"}, true},
		{config.Traces{Endpoint: "localhost:4317"}, true},
		{config.Traces{Endpoint: "otel.example.com:4317"}, false},
		{config.Traces{Endpoint: "otel.example.com:4317", Insecure: &yes}, true},
		{config.Traces{Endpoint: "127.0.0.1:4317", Insecure: &no}, false},
	}
	for _, tt := range tests {
		if got := insecure(&tt.tc); got != tt.want {
			t.Errorf("insecure(%s, %v) = %v, want %v", tt.tc.Endpoint, tt.tc.Insecure, got, tt.want)
		}
	}
}
