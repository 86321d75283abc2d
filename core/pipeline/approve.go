package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// approve holds a tool call that the tenant's policy wants approved until
// a person says yes: the request's user through an elicitation form, else
// an operator through `cexecctl approvals`. It fails closed: a denial, no
// answer within the rule's timeout, or nobody to ask refuse the call. The
// decision is made here, in the daemon; nothing the program or the model
// sends can approve a call.
func (x *Executor) approve(ctx context.Context, gs *guard.Session, req *CodeRequest, server, tool string, args json.RawMessage) error {
	called := bridge.CalledFrom(ctx)
	var hints policy.ToolHints
	switch {
	case called != nil && called.Tool.Name != "":
		a := called.Tool.Annotations
		hints = policy.ToolHints{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint, Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint}
	case tool == bridge.MethodReadResource || tool == bridge.MethodGetPrompt:
		// A program's read_resource or a workflow's prompts/get (no catalog
		// tool) changes nothing, so only a tool pattern naming
		// <server>/read_resource or <server>/get_prompt holds it.
		readOnly, idempotent := true, true
		hints = policy.ToolHints{ReadOnly: &readOnly, Idempotent: &idempotent}
	}
	rule := gs.Policy().Approval(server, tool, hints)
	if rule == nil {
		return nil
	}
	note := func(s string) {
		if called != nil {
			called.SetApproval(s)
		}
	}
	refuse := func(why string) error {
		note(why)
		x.Log.Info("tool call not approved", "tenant", req.Tenant, "session", req.Session, "server", server, "tool", tool, "outcome", why)
		return &sandbox.CallError{Type: TypeDenied, Message: fmt.Sprintf("approval: %s/%s was not called: %s", server, tool, why)}
	}
	// The person sees the arguments as the model does: PII as tokens.
	shown, err := gs.TokenizeJSON(ctx, args)
	if err != nil {
		return refuse("its arguments could not be checked for sensitive data to show them for approval")
	}
	why := rule.Why(server, tool, hints)
	wctx, cancel := context.WithTimeout(ctx, rule.Timeout)
	defer cancel()

	ok, by, err := x.askUser(wctx, req, server, tool, shown, why)
	if by == "" {
		if x.Approvals == nil {
			return refuse("it needs approval and nobody can be asked (the client cannot answer elicitations)")
		}
		by = "an operator"
		ok, err = x.Approvals.wait(wctx, PendingApproval{Tenant: req.Tenant, Session: req.Session,
			Server: server, Tool: tool, Arguments: shown, Reason: why})
	}
	switch {
	case err != nil && ctx.Err() != nil:
		note("abandoned: the execution ended while waiting")
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return refuse(fmt.Sprintf("no approval from %s within %s (%s)", by, rule.Timeout, why))
	case err != nil:
		return refuse(fmt.Sprintf("the approval request failed: %v", err))
	case !ok:
		return refuse("denied by " + by)
	}
	note("approved by " + by)
	x.Log.Info("tool call approved", "tenant", req.Tenant, "session", req.Session, "server", server, "tool", tool, "by", by)
	return nil
}

// approveField is the form's one field.
const approveField = "approve"

// askUser asks the request's user through an elicitation form. by is who
// answered ("the user"), or empty when the user cannot be asked, so the
// operator's queue takes over.
func (x *Executor) askUser(ctx context.Context, req *CodeRequest, server, tool string, shown json.RawMessage, why string) (ok bool, by string, _ error) {
	if req.Asker == nil {
		return false, "", nil
	}
	res, err := req.Asker.Elicit(ctx, mcp.ElicitationParams{
		Mode: mcp.ElicitationModeForm,
		Message: fmt.Sprintf("cexec: the program wants to call the tool %s on the MCP server %s with the arguments %s. %s. Approve this call?",
			tool, server, shown, capitalize(why)),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				approveField: map[string]any{"type": "boolean", "title": "Approve " + server + "/" + tool,
					"description": "true runs the call; false refuses it"},
			},
			"required": []string{approveField},
		},
	})
	switch {
	case errors.Is(err, ErrCannotAsk):
		return false, "", nil
	case err != nil:
		return false, "the user", err
	}
	switch res.Action {
	case mcp.ElicitationResponseActionDecline:
		return false, "the user, who declined the form", nil
	case mcp.ElicitationResponseActionCancel:
		return false, "the user, who cancelled the form", nil
	case mcp.ElicitationResponseActionAccept:
	default:
		return false, "the user (an answer that is not accept, decline or cancel)", nil
	}
	content, _ := res.Content.(map[string]any)
	yes, _ := content[approveField].(bool)
	return yes, "the user", nil
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
