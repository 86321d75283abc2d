// Package telemetry is cexecd's OpenTelemetry tracing: one trace per MCP
// request or execution, with spans for the pipeline's stages, plugin calls
// (otelgrpc on the plugins' connections), the sandbox run, each tool call from
// code and each upstream MCP call, exported over OTLP.
//
// Tracing is on only when cexec.hcl has telemetry { traces { ... } }. Off, the
// Start helpers return the context unchanged and a no-op span without
// allocating, and no gRPC or HTTP instrumentation is installed.
//
// Spans never carry tool arguments, results, program code or output: they may
// hold PII or secrets. They carry names (server, tool, MCP method), the tenant,
// the session and outcomes.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cexec/cexec/core/config"
)

// ScopeName is the instrumentation scope of cexecd's own spans.
const ScopeName = "github.com/cexec/cexec"

// tracing is the daemon's tracer while tracing is on.
type tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// active is nil while tracing is off.
var active atomic.Pointer[tracing]

// Enabled reports whether spans are being recorded and exported.
func Enabled() bool { return active.Load() != nil }

// Options configure Setup.
type Options struct {
	// ServiceName and ServiceVersion name cexecd in its traces' resource;
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override them.
	ServiceName    string
	ServiceVersion string
	Log            hclog.Logger
}

// Setup turns tracing on as tc says (nil leaves it off, as does
// OTEL_SDK_DISABLED=true) and returns the function that flushes and stops it.
// Call it once, before the plugins start and the upstream servers connect:
// their gRPC and HTTP clients are instrumented when they are built.
func Setup(ctx context.Context, tc *config.Traces, o Options) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if tc == nil {
		return noop, nil
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		o.Log.Info("tracing configured but OTEL_SDK_DISABLED=true; traces are off")
		return noop, nil
	}
	exp, protocol, err := newExporter(ctx, tc)
	if err != nil {
		return noop, fmt.Errorf("start trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", o.ServiceName), attribute.String("service.version", o.ServiceVersion)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("trace resource: %w", err)
	}
	// A failed export is logged, not fatal: traces are best effort.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { o.Log.Warn("tracing", "error", err) }))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(requestSampler{root: sdktrace.TraceIDRatioBased(tc.SampleRatio)}),
	)
	t := &tracing{
		tp:     tp,
		tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(o.ServiceVersion)),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	active.Store(t)
	o.Log.Info("tracing on", "protocol", protocol, "endpoint", endpointShown(tc), "sample_ratio", tc.SampleRatio)
	return func(ctx context.Context) error {
		active.CompareAndSwap(t, nil)
		// Shutdown flushes the spans still batched.
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("flush traces: %w", err)
		}
		return nil
	}, nil
}

// endpointShown is where traces go, for the log.
func endpointShown(tc *config.Traces) string {
	if tc.Endpoint != "" {
		return tc.Endpoint
	}
	return "(from OTEL_EXPORTER_OTLP_* or the exporter's default)"
}

// protocolOf is the configured protocol, else the OTLP variables', else grpc.
func protocolOf(tc *config.Traces) string {
	if tc.Protocol != "" {
		return tc.Protocol
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			if strings.HasPrefix(v, "http") {
				return "http"
			}
			return "grpc"
		}
	}
	return "grpc"
}

// insecure says whether a bare host:port endpoint is reached without TLS:
// as configured, else only on a loopback address.
func insecure(tc *config.Traces) bool {
	if tc.Insecure != nil {
		return *tc.Insecure
	}
	host, _, err := net.SplitHostPort(tc.Endpoint)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newExporter builds the OTLP exporter. Attributes left unset are read by
// the exporter from OTEL_EXPORTER_OTLP_* (endpoint, headers, TLS, timeout).
func newExporter(ctx context.Context, tc *config.Traces) (sdktrace.SpanExporter, string, error) {
	url := strings.Contains(tc.Endpoint, "://")
	switch protocolOf(tc) {
	case "http":
		var opts []otlptracehttp.Option
		switch {
		case url:
			opts = append(opts, otlptracehttp.WithEndpointURL(httpTracesURL(tc.Endpoint)))
		case tc.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(tc.Endpoint))
		}
		if (!url && tc.Endpoint != "" && insecure(tc)) || (tc.Insecure != nil && *tc.Insecure) {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(tc.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(tc.Headers))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		return exp, "http", err
	default:
		var opts []otlptracegrpc.Option
		switch {
		case url:
			opts = append(opts, otlptracegrpc.WithEndpointURL(tc.Endpoint))
		case tc.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(tc.Endpoint))
		}
		if (!url && tc.Endpoint != "" && insecure(tc)) || (tc.Insecure != nil && *tc.Insecure) {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(tc.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(tc.Headers))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		return exp, "grpc", err
	}
}

// httpTracesURL adds OTLP/HTTP's traces path to a URL that has no path, as
// OTEL_EXPORTER_OTLP_ENDPOINT's is; a URL with a path is used as it is.
func httpTracesURL(endpoint string) string {
	u, err := neturl.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}
