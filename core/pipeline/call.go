package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/catalog"
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
	// Asker is as CodeRequest's.
	Asker Asker
	// Progress, when set, receives the upstream's progress on the call, as
	// CodeRequest.Progress does.
	Progress func(Progress)
}

// toolCall is the call a CodeRequest makes instead of running code: a
// tool call, or with uri set a resource read.
type toolCall struct {
	server, tool string
	args         json.RawMessage
	uri          string
	// prompt, when set, makes the call a prompts/get of that prompt with
	// promptArgs.
	prompt     string
	promptArgs map[string]string
}

// ResourceReadRequest is one resources/read outside a program (a
// workflow's call: mcp).
type ResourceReadRequest struct {
	Tenant, Session, Vault string
	Server, URI            string
	ModelFacing            bool
}

// ReadResource reads a resource on the path a program's read_resource
// takes (the bridge's: allowed servers, the policy and guards seeing it as
// tool read_resource, PII tokens restored in the URI, the result size
// limit), logged in the session like CallTool. The result is the contents
// as a program gets them. No sandbox is used.
func (x *Executor) ReadResource(ctx context.Context, req ResourceReadRequest) (*CodeResult, error) {
	return x.ExecuteCode(ctx, CodeRequest{
		Tenant: req.Tenant, Session: req.Session, Vault: req.Vault,
		Code:         fmt.Sprintf("read_resource(%q, %q)", req.Server, req.URI),
		MaxToolCalls: 1, ModelFacing: req.ModelFacing,
		call: &toolCall{server: req.Server, tool: bridge.MethodReadResource, uri: req.URI},
	})
}

// PromptGetRequest is one prompts/get outside a program (a workflow's
// call: mcp).
type PromptGetRequest struct {
	Tenant, Session, Vault string
	Server, Name           string
	Arguments              map[string]string
	ModelFacing            bool
}

// GetPrompt gets an upstream's prompt on the path ReadResource takes: the
// policy and guards see it as tool get_prompt with arguments {"name",
// "arguments"} (PII tokens restored), approvals apply to
// <server>/get_prompt, and it is logged in the session. The result is the
// prompts/get result. No sandbox is used.
func (x *Executor) GetPrompt(ctx context.Context, req PromptGetRequest) (*CodeResult, error) {
	args, err := json.Marshal(req.Arguments)
	if err != nil {
		return nil, err
	}
	return x.ExecuteCode(ctx, CodeRequest{
		Tenant: req.Tenant, Session: req.Session, Vault: req.Vault,
		Code:         fmt.Sprintf("get_prompt(%q, %q, %s)", req.Server, req.Name, args),
		MaxToolCalls: 1, ModelFacing: req.ModelFacing,
		call: &toolCall{server: req.Server, tool: bridge.MethodGetPrompt, prompt: req.Name, promptArgs: req.Arguments},
	})
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
		MaxToolCalls: 1, ModelFacing: req.ModelFacing, Progress: req.Progress, Asker: req.Asker,
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
		SignIn:         x.signInHook(&req),
	})
	// The upstream's progress and log messages reach the agent and the
	// session log as a program's calls' do.
	h := &host{req: &req}
	if req.Progress != nil {
		h.progress = newProgressReporter(req.Progress, req.tokenizeProgress, x.Log, true)
	}
	start := time.Now()
	nctx := catalog.WithCallNotices(ctx, h.notices())
	var res json.RawMessage
	var err error
	switch {
	case c.prompt != "":
		res, err = exec.GetPrompt(nctx, c.server, c.prompt, c.promptArgs)
	case c.uri != "":
		res, err = exec.ReadResource(nctx, c.server, c.uri)
	default:
		res, err = exec.CallTool(nctx, c.server, c.tool, c.args)
	}
	out.Duration = time.Since(start)
	if h.progress != nil {
		h.progress.stop()
	}
	out.ToolCalls, out.Summary, out.UpstreamLog = exec.Calls(), exec.Summary(), h.upstreamLog()
	if err != nil {
		var ce *sandbox.CallError
		if !errors.As(err, &ce) {
			return out, err // the call record, for the session log and the audit
		}
		out.ExitCode = 1
		out.Error = &sandbox.ExecError{Type: ce.Type, Message: ce.Message}
		return out, nil
	}
	if c.uri != "" || c.prompt != "" {
		out.Result = res
		return out, nil
	}
	return out, callResult(out, c.server, newAttachments(t, req.Session, x.MaxInlineAttachment), res)
}

// callResult sets out's result from a call's value as the agent reads it:
// a rich result's texts (and descriptions of resource links) joined as the
// result, its images, audio and resources as attachments.
func callResult(out *CodeResult, server string, att *attachments, res json.RawMessage) error {
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
		a, text, ok := contentAttachment(server, c)
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
