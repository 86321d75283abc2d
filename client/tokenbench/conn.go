package tokenbench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
)

// conn is an MCP client that keeps replies as the server sent them: what a
// model reads is the wire JSON, and mcp-go's typed results would re-encode
// (and drop parts of) tool definitions.
type conn struct {
	t            transport.Interface
	id           atomic.Int64
	instructions string
}

// dialStdio starts an upstream MCP server as a direct client would.
func dialStdio(ctx context.Context, env []string, command string, args ...string) (*conn, error) {
	t := transport.NewStdio(command, env, args...)
	return start(ctx, t, command)
}

// dialFace opens a session on cexecd's MCP socket as tenant.
func dialFace(ctx context.Context, socket, tenant string) (*conn, error) {
	t, err := transport.NewStreamableHTTP(endpoint.UnixBaseURL+endpoint.MCPPath,
		transport.WithHTTPBasicClient(endpoint.UnixClient(socket)),
		transport.WithHTTPHeaders(map[string]string{endpoint.TenantHeader: tenant}))
	if err != nil {
		return nil, fmt.Errorf("mcp client for %s: %w", socket, err)
	}
	return start(ctx, t, socket)
}

func start(ctx context.Context, t transport.Interface, what string) (*conn, error) {
	if err := t.Start(ctx); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	c := &conn{t: t}
	raw, err := c.call(ctx, "initialize", map[string]any{
		"protocolVersion": mcp.LATEST_PROTOCOL_VERSION,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "cexec-bench-tokens", "version": "1"},
	})
	if err != nil {
		_ = t.Close()
		return nil, fmt.Errorf("initialize %s: %w", what, err)
	}
	var init struct {
		Instructions string `json:"instructions"`
	}
	_ = json.Unmarshal(raw, &init)
	c.instructions = init.Instructions
	if err := t.SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: "notifications/initialized"}}); err != nil {
		_ = t.Close()
		return nil, fmt.Errorf("initialized %s: %w", what, err)
	}
	return c, nil
}

func (c *conn) close() { _ = c.t.Close() }

func (c *conn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	res, err := c.t.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
		ID: mcp.NewRequestId(c.id.Add(1)), Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, fmt.Errorf("%s: %s", method, res.Error.Message)
	}
	return res.Result, nil
}

// tools returns every tool definition the server lists, as sent.
func (c *conn) tools(ctx context.Context) ([]json.RawMessage, error) {
	var all []json.RawMessage
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := c.call(ctx, "tools/list", params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		all = append(all, page.Tools...)
		if cursor = page.NextCursor; cursor == "" {
			return all, nil
		}
	}
}

// result is a tool's reply as a model reads it: the text of its content.
type result struct {
	text    string
	isError bool
}

// callTool calls a tool; an isError reply is a result, not an error.
func (c *conn) callTool(ctx context.Context, name string, args any) (result, error) {
	raw, err := c.call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return result{}, err
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return result{}, fmt.Errorf("tools/call %s: %w", name, err)
	}
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return result{text: b.String(), isError: r.IsError}, nil
}
