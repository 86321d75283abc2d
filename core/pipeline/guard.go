package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/core/telemetry"
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
	// TypeWithheld: the output could not be tokenized (a guard cannot
	// detect, the vault could not be saved), so none is returned.
	TypeWithheld = "OutputWithheld"
)

// guarded runs req under the guard layer, when there is one: tokens in the
// code's string literals are restored and the real code checked (deny_code,
// the guards' CheckCode), every tool call is vetted (allow/deny,
// constraints, max_tool_calls, the guards' CheckToolCall) with its tokens
// restored, and, for a model-facing request, everything the result carries
// is tokenized and held to max_output. A refusal is a result, not an error.
func (x *Executor) guarded(ctx context.Context, t *workspace.Tenant, req CodeRequest) (*CodeResult, error) {
	ctx = x.withAsker(ctx, req)
	if x.Guard == nil {
		return x.execute(ctx, t, req)
	}
	vault := req.Vault
	if vault == "" {
		vault = req.Session
	}
	gs, err := x.Guard.Open(req.Tenant, vault)
	if err != nil {
		return nil, fmt.Errorf("open guard session: %w", err)
	}
	defer func() {
		if err := gs.Close(); err != nil {
			x.Log.Warn("close guard session", "tenant", req.Tenant, "session", vault, "error", err)
		}
	}()
	code, err := req.Code, error(nil)
	if req.call == nil {
		// A call has no code to check; the tool call is vetted below.
		gctx, guardSpan := telemetry.Start(ctx, telemetry.SpanGuardBefore)
		code, err = gs.PrepareCode(gctx, req.Code)
		telemetry.End(guardSpan, err)
	}
	if err != nil {
		if !errors.Is(err, pluginapi.ErrDenied) {
			return nil, fmt.Errorf("prepare code: %w", err)
		}
		metrics.Denial(req.Tenant, "code")
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
				metrics.Denial(req.Tenant, "tool_call")
				return nil, &sandbox.CallError{Type: TypeDenied, Message: err.Error()}
			}
			return nil, err
		}
		if err := x.approve(ctx, gs, &req, server, tool, real); err != nil {
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
		// A progress message is one line (or the program's own words),
		// tokenized whole in the session's vault.
		req.tokenizeProgress = gs.Tokenize
	}
	out, err := x.execute(ctx, t, req)
	if out == nil || !req.ModelFacing {
		return out, err
	}
	if err != nil {
		// What a stopped program did goes to the session log, checked as
		// any output is, though the request that would have waited for
		// the check has ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), partialCheckTimeout)
		defer cancel()
		ctx = cctx
	}
	ctx, guardSpan := telemetry.Start(ctx, telemetry.SpanGuardAfter)
	defer guardSpan.End()
	tokenizeUpstreamLog(ctx, gs, out.UpstreamLog)
	return tokenizeResult(ctx, gs, gx, out), err
}

// partialCheckTimeout bounds the check of a stopped program's output: a
// guard that does not answer in time withholds it.
const partialCheckTimeout = 10 * time.Second

// tokenizeResult replaces out's texts by their model-facing form: PII
// tokenized, within the policy's max_output. The structured result is
// charged first, as it cannot be cut, then the error, then stdout and
// stderr. When any text cannot be tokenized, none is returned.
func tokenizeResult(ctx context.Context, gs *guard.Session, gx *guard.Execution, out *CodeResult) *CodeResult {
	out.Tokenized = true
	if err := tokenizeTexts(ctx, gs, gx, out); err != nil {
		out.Stdout, out.Stderr, out.Result, out.Attachments = nil, nil, nil, nil
		msg := "cexec withheld this execution's output because it could not be checked for sensitive data: " + err.Error()
		if d := (*guard.Denial)(nil); errors.As(err, &d) && d.Hook == "Detect" && guard.Restarting(err) {
			// The usual cause, a guard restarting, passes: say what to do.
			// The program did run, so its effects (files, tool calls) stand.
			msg = fmt.Sprintf("the program ran, but guard %s, which checks its output for sensitive data, is unavailable (stopped or restarting); "+
				"nothing of the output was returned; try again in a moment", d.Guard)
		}
		out.Error = &sandbox.ExecError{Type: TypeWithheld, Message: msg}
		// The program names the servers and tools it calls, and upstream
		// errors quote arguments: none of it can be checked either.
		for i := range out.ToolCalls {
			out.ToolCalls[i].Error = ""
		}
		out.Summary.Tools = nil
	}
	return out
}

// tokenizeTexts tokenizes every text of out with one detection: the
// structured result, the error, stdout and stderr, the tool calls'
// servers, tools and errors (the program names them, and the summary
// quotes upstream servers), and the attachments' texts, names and URIs. Then it charges what max_output counts, in
// that order. The MCP face returns these texts as they are.
func tokenizeTexts(ctx context.Context, gs *guard.Session, gx *guard.Execution, out *CodeResult) error {
	var b textBatch
	var e sandbox.ExecError
	if out.Error != nil {
		e = *out.Error
		b.add(&e.Type, &e.Message, &e.Traceback)
	}
	stdout, stderr := string(out.Stdout), string(out.Stderr)
	var stdoutNote, stderrNote string
	if out.OutputTruncated {
		// The sandbox cut the raw output at its cap, perhaps inside a
		// value, and a value's prefix ("jane.doe@cor") is no longer
		// detectable: the cut tail goes before tokenizing.
		stdout, stdoutNote = dropCut(stdout)
		stderr, stderrNote = dropCut(stderr)
	}
	b.add(&stdout, &stderr)
	calls := slices.Clone(out.ToolCalls)
	for i := range calls {
		b.add(&calls[i].Server, &calls[i].Tool, &calls[i].Error)
	}
	tools := slices.Clone(out.Summary.Tools)
	for i := range tools {
		b.add(&tools[i].Server, &tools[i].Tool, &tools[i].LastError)
	}
	// Attachments' texts and the names the program gave them are text like
	// printed output; binary data is not scanned.
	atts := slices.Clone(out.Attachments)
	for i := range atts {
		b.add(&atts[i].Text, &atts[i].Name, &atts[i].URI)
	}
	toks, result, err := gs.TokenizeTexts(ctx, b.texts, out.Result)
	if err != nil {
		return err
	}
	b.set(toks)

	var denied error
	if len(result) > 0 {
		result, denied = gx.ChargeJSON(result)
		if denied != nil && !errors.Is(denied, pluginapi.ErrDenied) {
			return denied
		}
	}
	out.Result = result
	if out.Error != nil {
		e.Message, e.Traceback = gx.Charge(e.Message), gx.Charge(e.Traceback)
		out.Error = &e
	}
	out.Stdout, out.Stderr = []byte(gx.Charge(stdout)+stdoutNote), []byte(gx.Charge(stderr)+stderrNote)
	for i := range atts {
		atts[i].Text = gx.Charge(atts[i].Text)
	}
	out.ToolCalls, out.Summary.Tools, out.Attachments = calls, tools, atts
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

// textBatch gathers the distinct non-empty texts behind some strings, so
// that one detection serves them all and a text repeated a thousand times
// (a tool's name in every call record) is sent once.
type textBatch struct {
	texts []string
	at    map[string]int
	refs  []*string
}

func (b *textBatch) add(ps ...*string) {
	for _, p := range ps {
		if *p == "" {
			continue
		}
		if b.at == nil {
			b.at = map[string]int{}
		}
		if _, ok := b.at[*p]; !ok {
			b.at[*p] = len(b.texts)
			b.texts = append(b.texts, *p)
		}
		b.refs = append(b.refs, p)
	}
}

// set replaces every gathered string by its counterpart in toks (the
// texts' tokenized forms, in order).
func (b *textBatch) set(toks []string) {
	for _, p := range b.refs {
		*p = toks[b.at[*p]]
	}
}

// dropCut is dropCutTail with a note saying what it dropped, for the end
// of the text: without it, a long line cut by the sandbox vanishes
// unexplained (a 2 MB line leaves nothing of the 1 MiB kept).
func dropCut(s string) (kept, note string) {
	kept = dropCutTail(s)
	if len(kept) == len(s) {
		return s, ""
	}
	note = fmt.Sprintf("(%d bytes of an unfinished line were dropped at the output limit, as a cut value cannot be checked for sensitive data; print less or split long lines)", len(s)-len(kept))
	if kept != "" && !strings.HasSuffix(kept, "\n") {
		note = "\n" + note
	}
	return kept, note
}

// maxCutValue bounds the values dropCutTail protects: longer than any
// address, number or name the guards detect (a long secret may lose only
// its end).
const maxCutValue = 256

// dropCutTail removes the end of raw text that was cut off mid-stream:
// the unfinished last line when it is short, else the last maxCutValue
// bytes backed off to a boundary no value spans, so that no value
// straddling the cut is left as a prefix. It allocates nothing.
func dropCutTail(s string) string {
	if s == "" || s[len(s)-1] == '\n' {
		return s
	}
	floor := max(len(s)-maxCutValue, 0)
	if i := strings.LastIndexByte(s, '\n'); i >= floor {
		return s[:i+1]
	}
	for i := floor; i > 0; i-- {
		if boundary(s, i) {
			return s[:i]
		}
	}
	return ""
}

// boundary reports whether s may be cut before s[i] without splitting a
// value: after a delimiter of quoted or listed values, or a space between
// words (phone and card numbers hold spaces between digits).
func boundary(s string, i int) bool {
	switch s[i-1] {
	case '\n', '\r', '\t', '"', ',', ';', '<', '>', '|':
		return true
	case ' ':
		return !isDigit(s[i]) && (i < 2 || !isDigit(s[i-2]))
	}
	return false
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
