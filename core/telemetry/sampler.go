package telemetry

import (
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// requestSampler starts traces at requests only. A span with a parent
// follows its parent's decision; a new trace starting with a server or
// internal span (an MCP request, an execution) is kept at the configured
// ratio; a new trace starting with a client span is dropped: that is
// background work (the pool warming sandboxes, plugin health checks, an
// upstream reconnecting or listening), which would otherwise bury the
// requests' traces.
type requestSampler struct{ root sdktrace.Sampler }

func (s requestSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	psc := trace.SpanContextFromContext(p.ParentContext)
	if psc.IsValid() {
		d := sdktrace.Drop
		if psc.IsSampled() {
			d = sdktrace.RecordAndSample
		}
		return sdktrace.SamplingResult{Decision: d, Tracestate: psc.TraceState()}
	}
	if p.Kind == trace.SpanKindClient || p.Kind == trace.SpanKindProducer {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return s.root.ShouldSample(p)
}

func (s requestSampler) Description() string {
	return fmt.Sprintf("RequestSampler{%s}", s.root.Description())
}
