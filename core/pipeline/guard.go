package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// Guardrails opens a tenant session's view of the guard layer: its policy,
// the guard plugins and its PII vault (*guard.Guardrails).
type Guardrails interface {
	Open(tenant, session string) (*guard.Session, error)
}

// Error types of results the guard layer produced (ExecError.Type). A
// refusal is Python's PermissionError, so code that calls a denied tool can
// catch it like any refused operation.
const (
	// TypeDenied: the code, a tool call or the result was refused by the
	// tenant's policy or a guard plugin; the message names the rule.
	TypeDenied = "PermissionError"
	// TypeWithheld: the output could not be tokenized (a strict tenant's
	// guard is down, the vault could not be saved), so none is returned.
	TypeWithheld = "OutputWithheld"
)

// guarded runs req under the guard layer, when there is one: tokens in the
// code's string literals are restored and the real code checked (deny_code,
// the guards' CheckCode), every tool call is vetted (allow/deny,
// constraints, max_tool_calls, the guards' CheckToolCall) with its tokens
// restored, and, for a model-facing request, everything the result carries
// is tokenized and held to max_output. A refusal is a result, not an error.
func (x *Executor) guarded(ctx context.Context, t *workspace.Tenant, req CodeRequest) (*CodeResult, error) {
	if x.Guard == nil {
		return x.execute(ctx, t, req)
	}
	gs, err := x.Guard.Open(req.Tenant, req.Session)
	if err != nil {
		return nil, fmt.Errorf("open guard session: %w", err)
	}
	defer func() {
		if err := gs.Close(); err != nil {
			x.Log.Warn("close guard session", "tenant", req.Tenant, "session", req.Session, "error", err)
		}
	}()
	code, err := gs.PrepareCode(ctx, req.Code)
	if err != nil {
		if !errors.Is(err, pluginapi.ErrDenied) {
			return nil, fmt.Errorf("prepare code: %w", err)
		}
		out := &CodeResult{ExecResult: sandbox.ExecResult{ExitCode: 1, SandboxOK: true,
			Error: &sandbox.ExecError{Type: TypeDenied, Message: "the code was not run: " + err.Error()}}}
		if req.ModelFacing {
			return tokenizeResult(ctx, gs, gs.Begin(), out), nil
		}
		return out, nil
	}
	req.Code = code
	gx := gs.Begin()
	after := req.BeforeToolCall
	req.BeforeToolCall = func(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
		real, err := gx.ToolCall(ctx, server, tool, args)
		if err != nil {
			if errors.Is(err, pluginapi.ErrDenied) {
				return nil, &sandbox.CallError{Type: TypeDenied, Message: err.Error()}
			}
			return nil, err
		}
		if after != nil {
			return after(ctx, server, tool, real)
		}
		return real, nil
	}
	if req.ModelFacing {
		// Output chunks cannot be tokenized one by one: a value may span
		// two of them.
		req.Output = nil
	}
	out, err := x.execute(ctx, t, req)
	if err != nil || !req.ModelFacing {
		return out, err
	}
	return tokenizeResult(ctx, gs, gx, out), nil
}

// tokenizeResult replaces out's texts by their model-facing form: PII
// tokenized, within the policy's max_output. The structured result is
// charged first, as it cannot be cut, then the error, then stdout and
// stderr. When any text cannot be tokenized, none is returned.
func tokenizeResult(ctx context.Context, gs *guard.Session, gx *guard.Execution, out *CodeResult) *CodeResult {
	out.Tokenized = true
	if err := tokenizeTexts(ctx, gs, gx, out); err != nil {
		out.Stdout, out.Stderr, out.Result = nil, nil, nil
		out.Error = &sandbox.ExecError{Type: TypeWithheld,
			Message: "cexec withheld this execution's output because it could not be checked for sensitive data: " + err.Error()}
		for i := range out.ToolCalls {
			out.ToolCalls[i].Error = ""
		}
		for i := range out.Summary.Tools {
			out.Summary.Tools[i].LastError = ""
		}
	}
	return out
}

func tokenizeTexts(ctx context.Context, gs *guard.Session, gx *guard.Execution, out *CodeResult) error {
	var denied error
	if len(out.Result) > 0 {
		res, err := gx.OutputJSON(ctx, out.Result)
		switch {
		case errors.Is(err, pluginapi.ErrDenied):
			denied, out.Result = err, nil
		case err != nil:
			return err
		default:
			out.Result = res
		}
	}
	if e := out.Error; e != nil {
		m, err := gx.Output(ctx, e.Message)
		if err != nil {
			return err
		}
		tb, err := gx.Output(ctx, e.Traceback)
		if err != nil {
			return err
		}
		out.Error = &sandbox.ExecError{Type: e.Type, Message: m, Traceback: tb}
	}
	for _, b := range []*[]byte{&out.Stdout, &out.Stderr} {
		if len(*b) == 0 {
			continue
		}
		s, err := gx.Output(ctx, string(*b))
		if err != nil {
			return err
		}
		*b = []byte(s)
	}
	if err := tokenizeCalls(ctx, gs, out); err != nil {
		return err
	}
	if denied != nil {
		msg, err := gs.Tokenize(ctx, "the result was withheld: "+denied.Error())
		if err != nil {
			return err
		}
		if out.Error == nil {
			out.Error = &sandbox.ExecError{Type: TypeDenied, Message: msg}
		} else {
			out.Stderr = append(out.Stderr, "\ncexec: "+msg...)
		}
	}
	return nil
}

// tokenizeCalls tokenizes the tool calls' error messages, which quote
// upstream servers and go back to the model in the summary.
func tokenizeCalls(ctx context.Context, gs *guard.Session, out *CodeResult) error {
	done := map[string]string{"": ""}
	tok := func(s *string) error {
		t, ok := done[*s]
		if !ok {
			var err error
			if t, err = gs.Tokenize(ctx, *s); err != nil {
				return err
			}
			done[*s] = t
		}
		*s = t
		return nil
	}
	calls := make([]bridge.CallRecord, len(out.ToolCalls))
	copy(calls, out.ToolCalls)
	for i := range calls {
		if err := tok(&calls[i].Error); err != nil {
			return err
		}
	}
	out.ToolCalls = calls
	tools := make([]bridge.ToolSummary, len(out.Summary.Tools))
	copy(tools, out.Summary.Tools)
	for i := range tools {
		if err := tok(&tools[i].LastError); err != nil {
			return err
		}
	}
	out.Summary.Tools = tools
	return nil
}
