package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// ToolCallRequest is one upstream call the agent makes itself, outside a
// program (the MCP face's call_tool).
type ToolCallRequest struct {
	Tenant, Session string
	// Vault is as CodeRequest's.
	Vault        string
	Server, Tool string
	// Arguments is a JSON object; empty means {}.
	Arguments   json.RawMessage
	ModelFacing bool
}

// toolCall is the call a CodeRequest makes instead of running code.
type toolCall struct {
	server, tool string
	args         json.RawMessage
}

// CallTool makes one tool call on the path a program's call takes: the
// tenant's allowed servers, its policy and the guards' CheckToolCall, PII
// tokens restored in the arguments, validation against the input schema
// and the size limits; it is logged in the session as an execution whose
// code is the call. The result is the value a program would get (Result),
// or the call's failure (Error, typed as ToolError would be); for a
// model-facing request both are tokenized and held to max_output as an
// execution's are. No sandbox is used.
func (x *Executor) CallTool(ctx context.Context, req ToolCallRequest) (*CodeResult, error) {
	args := req.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return x.ExecuteCode(ctx, CodeRequest{
		Tenant: req.Tenant, Session: req.Session, Vault: req.Vault,
		Code:         fmt.Sprintf("call_tool(%q, %q, %s)", req.Server, req.Tool, args),
		MaxToolCalls: 1, ModelFacing: req.ModelFacing,
		call: &toolCall{server: req.Server, tool: req.Tool, args: args},
	})
}

// callOnce is execute for a CodeRequest that makes a call.
func (x *Executor) callOnce(ctx context.Context, t *workspace.Tenant, req CodeRequest) (*CodeResult, error) {
	c := req.call
	out := &CodeResult{ExecResult: sandbox.ExecResult{SandboxOK: true}}
	if x.Tools == nil {
		out.ExitCode = 1
		out.Error = &sandbox.ExecError{Type: bridge.TypeToolNotFound, Message: "no upstream MCP servers are configured (add mcp_server blocks to cexec.hcl)"}
		return out, nil
	}
	exec := x.Tools.NewExecution(bridge.ExecOptions{
		Tenant:         req.Tenant,
		MaxCalls:       1,
		AllowedServers: t.Quota().AllowedServers,
		Before:         req.BeforeToolCall,
	})
	start := time.Now()
	res, err := exec.CallTool(ctx, c.server, c.tool, c.args)
	out.Duration = time.Since(start)
	out.ToolCalls, out.Summary = exec.Calls(), exec.Summary()
	if err != nil {
		var ce *sandbox.CallError
		if !errors.As(err, &ce) {
			return nil, err
		}
		out.ExitCode = 1
		out.Error = &sandbox.ExecError{Type: ce.Type, Message: ce.Message}
		return out, nil
	}
	return out, callResult(out, newAttachments(t, req.Session, x.MaxInlineAttachment), res)
}

// callResult sets out's result from a call's value as the agent reads it:
// a rich result's texts (and descriptions of resource links) joined as the
// result, its images, audio and resources as attachments.
func callResult(out *CodeResult, att *attachments, res json.RawMessage) error {
	value, content, err := bridge.Unwrap(res)
	if err != nil {
		return err
	}
	if content == nil {
		out.Result = value
		return nil
	}
	var texts []string
	for _, c := range content {
		a, text, ok := contentAttachment(c)
		if !ok {
			texts = append(texts, text)
			continue
		}
		if _, err := att.add(a); err != nil {
			var ce *sandbox.CallError
			if !errors.As(err, &ce) {
				return err
			}
			texts = append(texts, "["+ce.Message+"]")
		}
	}
	out.Attachments = att.list()
	out.Result, err = json.Marshal(strings.Join(texts, "\n"))
	return err
}
