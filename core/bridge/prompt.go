package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// MethodGetPrompt is the tool name under which policies and guards see an
// upstream's prompts/get (a workflow's call: mcp with method prompts/get).
const MethodGetPrompt = "get_prompt"

// PromptGetter gets an upstream's prompts; *catalog.Catalog implements it.
type PromptGetter interface {
	GetPrompt(ctx context.Context, tenant, server, name string, args map[string]string) (*mcp.GetPromptResult, error)
}

// getPromptParams are the arguments the Before hook sees for a prompts/get.
type getPromptParams struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
}

// GetPrompt gets prompt name of server (prompts/get) for the execution's
// tenant, as ReadResource reads a resource: it counts as a call, is
// recorded as the server's "get_prompt", the tenant's allowed servers
// apply, and the Before hook sees it as a call of tool "get_prompt" with
// arguments {"name", "arguments"} (so policies and guards can allow or deny
// it, and PII tokens in the arguments are restored). The value is the
// prompts/get result as MCP returns it.
func (e *Execution) GetPrompt(ctx context.Context, server, name string, args map[string]string) (json.RawMessage, error) {
	return e.counted(ctx, server, MethodGetPrompt, fmt.Sprintf("prompt %s of %s was not fetched", name, server),
		func(ctx context.Context) (json.RawMessage, error) { return e.getPrompt(ctx, server, name, args) })
}

func (e *Execution) getPrompt(ctx context.Context, server, name string, args map[string]string) (json.RawMessage, error) {
	if _, known := e.b.cat.Server(server); !known || (e.opts.AllowedServers != nil && !slices.Contains(e.opts.AllowedServers, server)) {
		return nil, &sandbox.CallError{Type: TypeToolNotFound, Message: e.b.notFound(server, "", e.opts.AllowedServers, false)}
	}
	if e.opts.Before != nil {
		raw, err := json.Marshal(getPromptParams{Name: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		if raw, err = e.opts.Before(ctx, server, MethodGetPrompt, raw); err != nil {
			var ce *sandbox.CallError
			if errors.As(err, &ce) {
				return nil, ce
			}
			return nil, &sandbox.CallError{Type: TypeToolError, Message: err.Error()}
		}
		var p getPromptParams
		if err := json.Unmarshal(raw, &p); err != nil || p.Name == "" {
			return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: "get_prompt: the guards left no prompt name"}
		}
		name, args = p.Name, p.Arguments
	}
	pg, ok := e.b.cat.(PromptGetter)
	if !ok {
		return nil, &sandbox.CallError{Type: TypeToolError, Message: "this daemon's catalog cannot get upstream prompts"}
	}
	res, err := pg.GetPrompt(ctx, e.opts.Tenant, server, name, args)
	if err != nil {
		res, err = afterSignIn(ctx, err, e.opts.SignIn, func() (*mcp.GetPromptResult, error) {
			return pg.GetPrompt(ctx, e.opts.Tenant, server, name, args)
		})
	}
	if err != nil {
		return nil, callError(ctx, err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if limit := e.b.limits.forServer(server).MaxResult; int64(len(out)) > limit {
		return nil, &sandbox.CallError{Type: TypeResultTooLarge, Message: fmt.Sprintf(
			"prompt %s of server %s is %s, over the limit of %s per call (max_result_size)", name, server, formatSize(int64(len(out))), formatSize(limit))}
	}
	return out, nil
}
