package pluginapi

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
)

// traceServerOption extracts the W3C trace context (traceparent) that a
// tracing host sends in each call's gRPC metadata, so a plugin's handlers
// get a ctx inside the host's trace: trace.SpanContextFromContext(ctx) names
// it, and a plugin that installs its own tracer provider
// (otel.SetTracerProvider, before or after Serve) gets a server span per call and can start child
// spans from ctx. Without a tracer provider nothing is recorded. A host
// that does not trace sends no trace context, and ctx carries none.
func traceServerOption() grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
	))
}
