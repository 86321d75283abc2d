package pluginapi

import (
	"context"
	"net"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// seenHealth records the span context its handler's ctx carries.
type seenHealth struct {
	healthpb.UnimplementedHealthServer
	seen chan trace.SpanContext
}

func (h *seenHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.seen <- trace.SpanContextFromContext(ctx)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestTraceContextReachesPlugin: a call from a tracing host (otelgrpc's
// client handler, as core/pluginhost installs it) arrives in the plugin's
// handler inside the host's trace, so the plugin can start child spans.
func TestTraceContextReachesPlugin(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(traceServerOption())
	h := &seenHealth{seen: make(chan trace.SpanContext, 1)}
	healthpb.RegisterHealthServer(srv, h)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{}))))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	ctx, span := tp.Tracer("host").Start(context.Background(), "execute_code")
	defer span.End()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	got := <-h.seen
	if !got.IsValid() || got.TraceID() != span.SpanContext().TraceID() {
		t.Errorf("plugin handler's trace = %v, want the host's %v", got.TraceID(), span.SpanContext().TraceID())
	}

	// A host that does not trace sends nothing: the handler's ctx has no trace.
	plain, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Close() }()
	if _, err := healthpb.NewHealthClient(plain).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-h.seen; got.IsValid() {
		t.Errorf("untraced call arrived in trace %v", got.TraceID())
	}
}
