package catalog

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/telemetry"
)

// Call is call in an MCP client span (tools/call {tool}), whose trace
// context the request carries in its _meta and, over HTTP, in its
// traceparent header.
func (c *Catalog) Call(ctx context.Context, tenant, server, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	ctx, span := telemetry.StartMCPClient(ctx, server, c.transportOf(server), telemetry.MethodToolsCall, tool)
	res, err := c.call(ctx, tenant, server, tool, args)
	err = c.mask.Load().err(err)
	telemetry.EndMCP(span, res != nil && res.IsError, err)
	return res, err
}

// ReadResource is readResource in an MCP client span (resources/read); the
// URI is not recorded: it may name a person's data.
func (c *Catalog) ReadResource(ctx context.Context, tenant, server, uri string) (*mcp.ReadResourceResult, error) {
	ctx, span := telemetry.StartMCPClient(ctx, server, c.transportOf(server), telemetry.MethodResourcesRead, "")
	res, err := c.readResource(ctx, tenant, server, uri)
	err = c.mask.Load().err(err)
	telemetry.EndMCP(span, false, err)
	return res, err
}

// transportOf is server's configured transport, "" when unknown.
func (c *Catalog) transportOf(server string) string {
	if !telemetry.Enabled() {
		return ""
	}
	if u := c.set().byName[server]; u != nil {
		return string(u.cfg.Transport)
	}
	return ""
}
