package mcpface

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/telemetry"
)

// traced runs a tool handler in the request's MCP server span
// (tools/call {tool}), a child of the trace context the client sent in
// _meta or, failing that, in a traceparent header.
func traced(name string, h server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !telemetry.Enabled() {
			return h(ctx, req)
		}
		var sid string
		if s := server.ClientSessionFromContext(ctx); s != nil {
			sid = s.SessionID()
		}
		ctx, span := telemetry.StartMCPServer(ctx, telemetry.MethodToolsCall, name, sid, req.Params.Meta, req.Header)
		res, err := h(ctx, req)
		telemetry.EndMCP(span, res != nil && res.IsError, err)
		return res, err
	}
}
