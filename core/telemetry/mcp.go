package telemetry

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the OpenTelemetry semantic conventions for MCP.
const (
	attrMethod    = "mcp.method.name"
	attrSessionID = "mcp.session.id"
	attrToolName  = "gen_ai.tool.name"
	attrOperation = "gen_ai.operation.name"
	attrErrorType = "error.type"
	attrTransport = "network.transport"
)

// MethodToolsCall and MethodResourcesRead are the MCP methods traced.
const (
	MethodToolsCall     = "tools/call"
	MethodResourcesRead = "resources/read"
)

// mcpAttrs are a span's MCP attributes: a tools/call is a GenAI execute_tool
// operation on its tool.
func mcpAttrs(method, tool string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(attrMethod, method)}
	if method == MethodToolsCall {
		attrs = append(attrs, attribute.String(attrToolName, tool), attribute.String(attrOperation, "execute_tool"))
	}
	return attrs
}

// spanName is "{mcp.method.name} {tool}" for a tool call, else the method.
func spanName(method, tool string) string {
	if method == MethodToolsCall && tool != "" {
		return method + " " + tool
	}
	return method
}

// metaCarrier reads and writes trace context in an MCP request's _meta,
// unprefixed (traceparent, tracestate, baggage), as the MCP semantic
// conventions say.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c metaCarrier) Set(key, value string) { c[key] = value }

func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// StartMCPServer starts the server span of one MCP request to cexecd's
// face. Its parent is the trace context in the request's _meta, else in its
// HTTP headers (traceparent), else none: the request starts a trace.
func StartMCPServer(ctx context.Context, method, tool, sessionID string, meta *mcp.Meta, header http.Header) (context.Context, trace.Span) {
	t := active.Load()
	if t == nil {
		return ctx, noopSpan
	}
	pctx := ctx
	if meta != nil && meta.AdditionalFields != nil {
		pctx = t.prop.Extract(ctx, metaCarrier(meta.AdditionalFields))
	}
	if !trace.SpanContextFromContext(pctx).IsRemote() && header != nil {
		pctx = t.prop.Extract(ctx, propagation.HeaderCarrier(header))
	}
	attrs := mcpAttrs(method, tool)
	if sessionID != "" {
		attrs = append(attrs, attribute.String(attrSessionID, sessionID))
	}
	return t.tracer.Start(pctx, spanName(method, tool), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// EndMCP ends an MCP span: a tool result with isError is error.type
// tool_error, a failed request its error (the daemon's own text).
func EndMCP(span trace.Span, toolError bool, err error) {
	if !span.IsRecording() {
		return
	}
	switch {
	case err != nil:
		span.SetAttributes(attribute.String(attrErrorType, "_OTHER"))
		span.SetStatus(codes.Error, err.Error())
	case toolError:
		span.SetAttributes(attribute.String(attrErrorType, "tool_error"))
		span.SetStatus(codes.Error, "tool_error")
	}
	span.End()
}

// StartMCPClient starts the client span of one request cexecd sends an
// upstream MCP server (tool is the tool of a tools/call). transport is the
// connection's: "stdio", "http" or "sse".
func StartMCPClient(ctx context.Context, server, transport, method, tool string) (context.Context, trace.Span) {
	t := active.Load()
	if t == nil {
		return ctx, noopSpan
	}
	netTransport := "tcp"
	if transport == "stdio" {
		netTransport = "pipe"
	}
	attrs := append(mcpAttrs(method, tool), attribute.String(AttrServer, server), attribute.String(attrTransport, netTransport))
	return t.tracer.Start(ctx, spanName(method, tool), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// InjectMeta returns meta with ctx's trace context added (a new Meta when
// meta is nil), for a request to an upstream server; off, meta unchanged.
func InjectMeta(ctx context.Context, meta *mcp.Meta) *mcp.Meta {
	t := active.Load()
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = &mcp.Meta{}
	}
	if meta.AdditionalFields == nil {
		meta.AdditionalFields = map[string]any{}
	}
	t.prop.Inject(ctx, metaCarrier(meta.AdditionalFields))
	return meta
}
