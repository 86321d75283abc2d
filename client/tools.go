package client

import (
	"context"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// ListServers returns every upstream MCP server (state, pid, restarts,
// tools) and every package of local tools.
func (c *Client) ListServers(ctx context.Context) ([]*cexecv1.ServerInfo, error) {
	r, err := c.rpc.ListServers(ctx, &cexecv1.ListServersRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "list servers", err)
	}
	return r.GetServers(), nil
}

// ListTools returns the tools of server, or of every server when server is
// "". An unknown server is a gRPC NotFound status naming the known ones.
func (c *Client) ListTools(ctx context.Context, server string) ([]*cexecv1.ToolInfo, error) {
	r, err := c.rpc.ListTools(ctx, &cexecv1.ListToolsRequest{Server: server})
	if err != nil {
		return nil, c.wrap(ctx, "list tools", err)
	}
	return r.GetTools(), nil
}

// GetTool returns one tool ("server/tool") with its stub source, schemas and
// annotations.
func (c *Client) GetTool(ctx context.Context, id string) (*cexecv1.GetToolResponse, error) {
	r, err := c.rpc.GetTool(ctx, &cexecv1.GetToolRequest{Id: id})
	if err != nil {
		return nil, c.wrap(ctx, "get tool "+id, err)
	}
	return r, nil
}

// RefreshTools lists the tools of server again ("" means every server, the
// local tools and the shared skills), regenerating the stubs, and returns
// how many tools it has now.
func (c *Client) RefreshTools(ctx context.Context, server string) (int, error) {
	r, err := c.rpc.RefreshTools(ctx, &cexecv1.RefreshToolsRequest{Server: server})
	if err != nil {
		return 0, c.wrap(ctx, "refresh tools", err)
	}
	return int(r.GetTools()), nil
}

// SearchTools finds tools and skills for req.Query: detail_level name,
// description (the default) or full (adds the stub source and the input
// schema); limit 0 means the daemon's pipeline.search_limit.
func (c *Client) SearchTools(ctx context.Context, req *cexecv1.SearchToolsRequest) (*cexecv1.SearchToolsResponse, error) {
	r, err := c.rpc.SearchTools(ctx, req)
	if err != nil {
		return nil, c.wrap(ctx, "search tools", err)
	}
	return r, nil
}
