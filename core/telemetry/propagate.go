package telemetry

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc/stats"
)

// GRPCClientHandler is the stats handler for the plugins' gRPC connections:
// a client span per plugin call, its context sent in the call's metadata
// (traceparent), where pluginapi's server side picks it up. Nil while
// tracing is off.
func GRPCClientHandler() stats.Handler {
	t := active.Load()
	if t == nil {
		return nil
	}
	return otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(t.tp),
		otelgrpc.WithPropagators(t.prop),
		// Metrics are not this package's business.
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
}

// HTTPClient is the client for upstream MCP servers over HTTP: a client
// span per HTTP request, and its traceparent header. Nil while tracing is
// off, when the transports keep their own client.
func HTTPClient() *http.Client {
	t := active.Load()
	if t == nil {
		return nil
	}
	return &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport,
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(t.prop),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	)}
}
