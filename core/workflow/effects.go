package workflow

import "context"

// Effects are what runs do outside the engine; the daemon implements them
// on the path programs take (core/pipeline), so policies, argument
// validation, PII tokens in arguments and the session log apply to a
// workflow's calls as to a program's.
type Effects interface {
	// CallMCP makes one MCP request to a configured upstream: tools/call
	// (Params name, arguments), resources/read (uri) or prompts/get (name,
	// arguments). Its value is what a program's call would return.
	CallMCP(ctx context.Context, c MCPCall) (any, error)
	// RunScript runs a Python program in the tenant's sandbox with
	// Arguments; its value is what the program passed to result().
	RunScript(ctx context.Context, s Script) (any, error)
}

// MCPCall is one call: mcp task's request.
type MCPCall struct {
	Tenant, Run, Session string
	Server, Method       string
	Params               map[string]any
}

// Script is one run: script task.
type Script struct {
	Tenant, Run, Session string
	Code                 string
	Arguments            map[string]any
}
