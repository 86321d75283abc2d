package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of cexec's own (not in any semantic convention).
const (
	AttrTenant  = "cexec.tenant"
	AttrSession = "cexec.session"
	AttrServer  = "cexec.server"
	AttrOutcome = "cexec.outcome"
	AttrWarm    = "cexec.sandbox.warm"
)

// Span names of the pipeline.
const (
	SpanGuardBefore = "guard.before"
	SpanLease       = "pool.lease"
	SpanSandbox     = "sandbox.exec"
	SpanGuardAfter  = "guard.after"
	SpanLog         = "session.log"
)

// noopSpan is what every Start returns while tracing is off.
var noopSpan = trace.SpanFromContext(context.Background())

// Start starts an internal span, a child of ctx's. Off, it returns ctx
// unchanged and a no-op span, allocating nothing.
func Start(ctx context.Context, name string) (context.Context, trace.Span) {
	t := active.Load()
	if t == nil {
		return ctx, noopSpan
	}
	return t.tracer.Start(ctx, name)
}

// StartExecution starts the span of one execution (execute_code,
// execute_task, call_tool), the root of its trace unless a request's span
// is in ctx.
func StartExecution(ctx context.Context, name, tenant, session string) (context.Context, trace.Span) {
	t := active.Load()
	if t == nil {
		return ctx, noopSpan
	}
	attrs := []attribute.KeyValue{attribute.String(AttrTenant, tenant)}
	if session != "" {
		attrs = append(attrs, attribute.String(AttrSession, session))
	}
	return t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// StartToolCall starts the span of one tool call from code (core/bridge).
// It records the server and tool, never the arguments or the result.
func StartToolCall(ctx context.Context, tenant, server, tool string) (context.Context, trace.Span) {
	t := active.Load()
	if t == nil {
		return ctx, noopSpan
	}
	return t.tracer.Start(ctx, "call_tool "+server+"/"+tool, trace.WithAttributes(
		attribute.String(AttrTenant, tenant),
		attribute.String(AttrServer, server),
		attribute.String(attrToolName, tool),
	))
}

// EndOutcome ends span with its outcome: "ok" when errType is empty, else
// errType (a ToolError type, say), which also marks the span failed. Only
// the type is recorded: messages may quote arguments or results.
func EndOutcome(span trace.Span, errType string) {
	if !span.IsRecording() {
		return
	}
	if errType == "" {
		span.SetAttributes(attribute.String(AttrOutcome, "ok"))
	} else {
		span.SetAttributes(attribute.String(AttrOutcome, errType), attribute.String(attrErrorType, errType))
		span.SetStatus(codes.Error, errType)
	}
	span.End()
}

// End ends span, marking it failed with err's text when err is not nil.
// Use it where errors are the daemon's own (no program or tool data).
func End(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SetScope records the tenant and session on the span in ctx, once a
// request knows them.
func SetScope(ctx context.Context, tenant, session string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(AttrTenant, tenant), attribute.String(AttrSession, session))
}

// SetWarm records whether the execution's sandbox came warm from the pool.
func SetWarm(span trace.Span, warm bool) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool(AttrWarm, warm))
	}
}
