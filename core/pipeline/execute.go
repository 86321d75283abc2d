// Package pipeline orchestrates executions: execute_code runs a program in a
// pooled sandbox with its host calls (tool calls, checkpoints, skills,
// progress) answered by the daemon; execute_task adds tool selection, code
// generation and repair in front of it. While a program runs, its progress
// (cexec.progress, printed lines, upstreams' progress) can go to the caller
// as throttled reports (progress.go); a cancelled context stops it.
package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/telemetry"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// Leaser hands out pooled sandboxes (core/pool).
type Leaser interface {
	// AcquireFor takes the idle sandbox that suits an execution of
	// want.Session: for a persistent one, the sandbox that holds the
	// session's interpreter.
	AcquireFor(ctx context.Context, tenant string, want pool.Want) (*pool.Lease, error)
	// AcquireFresh creates a sandbox used once and destroyed on release.
	AcquireFresh(ctx context.Context, tenant string) (*pool.Lease, error)
}

// Runner runs a program in a sandbox (the sandbox backend plugin).
type Runner interface {
	Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error)
}

// Tools starts the tool-call bookkeeping of one execution (core/bridge).
type Tools interface {
	NewExecution(opts bridge.ExecOptions) *bridge.Execution
}

// CodeRequest is one program to run.
type CodeRequest struct {
	Tenant  string
	Session string
	// Vault names the session whose PII vault the guard layer uses, when
	// it is not Session: the MCP face passes its own session, so that an
	// execution continuing another session's log never restores (or
	// learns) that session's tokens.
	Vault string
	Code  string
	// Timeout overrides the sandbox default when non-zero.
	Timeout    time.Duration
	Persistent bool
	// FreshSandbox runs in a sandbox created for this execution and
	// destroyed after it (a cold start) instead of a warm pooled one.
	FreshSandbox bool
	// Task is the task description when the code was generated for one.
	Task string
	// MaxToolCalls bounds the program's tool calls (0: the bridge default).
	MaxToolCalls int
	// BeforeToolCall may rewrite or refuse each tool call's arguments. With
	// Executor.Guard set it runs after the guard layer's checks, on the real
	// (untokenized) arguments.
	BeforeToolCall func(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error)
	// Output, when set, receives stdout and stderr as they happen. It is
	// called from one goroutine at a time, and never for a ModelFacing
	// request under a guard layer: raw chunks cannot be tokenized.
	Output func(stream sandbox.Stream, data []byte)
	// ModelFacing says the result goes to a model (the MCP face,
	// execute_task and its code generators): with Executor.Guard set, the
	// result's stdout, stderr, structured result, error and tool call
	// errors are tokenized ([EMAIL_1]) and held to the tenant's max_output,
	// and the session log keeps that form. Operator requests (cexecctl
	// exec) leave it false and get the raw output.
	//
	// Do not tokenize a ModelFacing result again: the vault turns tokens it
	// issued, met in new text, into [LITERAL_n]. A caller that tokenizes on
	// its own can restore the raw text with the session's Untokenize, which
	// inverts Tokenize exactly; its own pass then issues the same tokens.
	ModelFacing bool
	// Progress, when set, receives throttled reports while the program
	// runs (progress.go): its cexec.progress calls, else its printed lines,
	// and its upstreams' progress on tool calls. For a ModelFacing request
	// under a guard layer the messages are tokenized as the result is.
	Progress func(Progress)

	// Asker reaches the user behind the request (the agent's MCP client,
	// the operator's terminal) for upstream elicitations and approvals;
	// nil: nobody can be asked.
	Asker Asker

	// call, set by CallTool, makes one tool call instead of running Code.
	call *toolCall
	// tokenizeProgress is the guard session's tokenizer for Progress
	// messages of a ModelFacing request.
	tokenizeProgress func(context.Context, string) (string, error)
}

// CodeResult is the outcome of one execution.
type CodeResult struct {
	sandbox.ExecResult
	// Stdout and Stderr hold what the program printed, as far as the
	// sandbox's output cap let through.
	Stdout, Stderr []byte
	SandboxID      string
	// Session is the session the execution was logged in (new when the
	// request named none).
	Session string
	// QuotaError is set when the tenant's workspace is over its disk quota
	// after the execution; the execution itself completed.
	QuotaError error
	// InterpreterLost, for a persistent execution, says that the session's
	// persistent interpreter had been ended, and why: the program ran
	// without the globals of the session's earlier executions.
	InterpreterLost string
	// Warm is true when the sandbox came warm from the pool.
	Warm      bool
	ToolCalls []bridge.CallRecord
	Summary   bridge.Summary
	// Elapsed is the whole execution as the daemon saw it, lease included.
	Elapsed time.Duration
	// Tokenized is set when the texts above are the model-facing ones
	// (CodeRequest.ModelFacing under a guard layer).
	Tokenized bool
	// UpstreamLog holds the log messages upstream servers sent during the
	// program's tool calls (not model-facing: the session log keeps them).
	UpstreamLog []workspace.UpstreamLog
	// Attachments are what the program showed (cexec.show), or a call's
	// non-text content, in order; text ones are tokenized with the rest.
	Attachments []Attachment
}

// Workspaces are the tenants' workspaces (core/workspace).
type Workspaces interface {
	Tenant(id string) (*workspace.Tenant, error)
	HandleHostCall(ctx context.Context, tenant, session, method string, params json.RawMessage) (json.RawMessage, error)
}

// Executor runs programs. It is safe for concurrent use.
type Executor struct {
	Pool       Leaser
	Sandbox    Runner
	Workspaces Workspaces
	// Tools may be nil when no upstream server is configured; call_tool
	// then fails with ToolNotFound.
	Tools Tools
	Log   hclog.Logger
	// Guard, when set, puts every execution under the tenant's policy and
	// the guard plugins, restores PII tokens in code and tool arguments,
	// and tokenizes model-facing results (core/guard).
	Guard Guardrails
	// Approvals holds the calls waiting for an operator's approval when
	// the request's Asker cannot ask (nil: such calls are denied).
	Approvals *Approvals
	// MaxInlineAttachment is the largest attachment returned inline (0:
	// DefaultMaxInlineAttachment); larger ones, and those past four times
	// it in one execution, are saved in the tenant's workspace.
	MaxInlineAttachment int64
	// Audit, when set, receives every execution, its tool calls and its
	// policy denials (core/audit).
	Audit Auditor
	// SignIn, when set, lets a call refused for want of an OAuth sign-in
	// offer the request's user a sign-in link (signin.go); nil: the program
	// gets the SignInRequired error.
	SignIn SignIn
	// SessionInterpreter runs each session's executions in one warm
	// interpreter of its own, each in new globals, rather than a forked
	// process each (config sandbox.session_interpreter).
	SessionInterpreter bool

	signIns signIns
}

// ExecuteCode runs req.Code in a sandbox of req.Tenant's and waits for it.
// An error means the program could not be run at all (pool full, backend
// down); a program that failed is a result with Error set.
func (x *Executor) ExecuteCode(ctx context.Context, req CodeRequest) (*CodeResult, error) {
	start := time.Now()
	t, err := x.Workspaces.Tenant(req.Tenant)
	if err != nil {
		return nil, err
	}
	run, err := t.Begin(req.Session)
	if err != nil {
		// Refused before it started (quota, max_concurrent, an invalid
		// session): counted and audited like any execution.
		if workspace.ValidateSessionID(req.Session) != nil {
			// Not a session (or none yet); the error quotes an invalid one.
			req.Session = ""
		}
		x.account(ctx, req, nil, err, start)
		return nil, err
	}
	req.Session = run.Session()
	ctx, span := telemetry.StartExecution(ctx, spanName(req), req.Tenant, req.Session)
	defer span.End()
	out, err := x.guarded(ctx, t, req)
	entry := workspace.Entry{Task: req.Task, Code: req.Code, Result: logResult(ctx, out, err)}
	if out != nil && req.Persistent && !req.FreshSandbox {
		entry.Interpreter = out.SandboxID
	}
	if out != nil && out.InterpreterLost != "" {
		entry.Warnings = []string{out.InterpreterLost}
	}
	if out != nil {
		entry.UpstreamLog = out.UpstreamLog
		for _, c := range out.ToolCalls {
			entry.ToolCalls = append(entry.ToolCalls, workspace.ToolCall{Server: c.Server, Tool: c.Tool,
				Duration: workspace.Duration(c.Duration), OK: c.OK, Error: c.Error, Approval: c.Approval})
		}
	}
	_, logSpan := telemetry.Start(ctx, telemetry.SpanLog)
	_, ferr := run.Finish(entry)
	x.account(ctx, req, out, err, start)
	telemetry.End(logSpan, ferr)
	quota := errors.Is(ferr, workspace.ErrQuotaExceeded)
	if ferr != nil && !quota {
		x.Log.Warn("log execution", "tenant", req.Tenant, "session", req.Session, "error", ferr)
	}
	if err != nil {
		return nil, &sessionError{session: req.Session, err: err}
	}
	out.Session = req.Session
	out.Elapsed = time.Since(start)
	if quota {
		out.QuotaError = ferr
	}
	return out, nil
}

// sessionError is an ExecuteCode error once the session was begun: the
// caller cannot learn the session otherwise when its request named none,
// and its log line of the failure names it. The text is the cause's.
type sessionError struct {
	session string
	err     error
}

func (e *sessionError) Error() string { return e.err.Error() }
func (e *sessionError) Unwrap() error { return e.err }

// ExecSession is the session the failed execution was logged in.
func (e *sessionError) ExecSession() string { return e.session }

// account counts an execution in the metrics and records it in the audit
// log.
func (x *Executor) account(ctx context.Context, req CodeRequest, out *CodeResult, err error, start time.Time) {
	oc, d := outcome(out, err), time.Since(start)
	metrics.Execution(req.Tenant, oc, d)
	x.audit(ctx, req, out, err, oc, d)
}

// execute runs req in a sandbox, or makes its one call. When it fails after
// the program started (cancelled, say), the result it returns with the error
// holds what the program did until then, for the session log and the audit
// only: ExecuteCode returns no result with an error.
func (x *Executor) execute(ctx context.Context, t *workspace.Tenant, req CodeRequest) (*CodeResult, error) {
	if req.call != nil {
		return x.callOnce(ctx, t, req)
	}
	// With SessionInterpreter an execution that asked for no persistent
	// interpreter runs in one with fresh globals.
	fresh := x.SessionInterpreter && !req.Persistent && !req.FreshSandbox
	want := pool.Want{Session: req.Session, Persistent: req.Persistent || fresh, FreshGlobals: fresh}
	acquire := func(ctx context.Context, tenant string) (*pool.Lease, error) {
		return x.Pool.AcquireFor(ctx, tenant, want)
	}
	if req.FreshSandbox {
		acquire = x.Pool.AcquireFresh
	}
	out, err := x.executeIn(ctx, t, req, acquire, want)
	if errors.Is(err, errSandboxGone) {
		// The sandbox died with a restarted backend before the pool heard
		// of the restart; the program never started, so it gets one more
		// sandbox.
		x.Log.Warn("the sandbox backend no longer knows a pooled sandbox; running in another", "tenant", req.Tenant, "error", err)
		out, err = x.executeIn(ctx, t, req, acquire, want)
	}
	return out, err
}

// errSandboxGone marks an execution that never started because the backend
// no longer had its sandbox.
var errSandboxGone = errors.New("the sandbox backend no longer has this sandbox (it was restarted); run the program again")

func (x *Executor) executeIn(ctx context.Context, t *workspace.Tenant, req CodeRequest, acquire func(context.Context, string) (*pool.Lease, error), want pool.Want) (*CodeResult, error) {
	lctx, leaseSpan := telemetry.Start(ctx, telemetry.SpanLease)
	lease, err := acquire(lctx, req.Tenant)
	telemetry.End(leaseSpan, err)
	if err != nil {
		return nil, fmt.Errorf("get a sandbox for tenant %s: %w", req.Tenant, err)
	}
	var exec *bridge.Execution
	if x.Tools != nil {
		exec = x.Tools.NewExecution(bridge.ExecOptions{
			Tenant:         req.Tenant,
			MaxCalls:       req.MaxToolCalls,
			AllowedServers: t.Quota().AllowedServers,
			Before:         req.BeforeToolCall,
			SignIn:         x.signInHook(&req),
		})
	}
	h := &host{req: &req, exec: exec, ws: x.Workspaces, att: newAttachments(t, req.Session, x.MaxInlineAttachment),
		lost: x.interpreterLost(t, req, lease)}
	if req.Progress != nil {
		h.progress = newProgressReporter(req.Progress, req.tokenizeProgress, x.Log, false)
	}
	ctx, runSpan := telemetry.Start(ctx, telemetry.SpanSandbox)
	telemetry.SetWarm(runSpan, lease.Reused)
	res, err := x.Sandbox.Exec(ctx, sandbox.ExecRequest{
		SandboxID:    lease.ID,
		Code:         req.Code,
		Timeout:      req.Timeout,
		Persistent:   want.Persistent,
		FreshGlobals: want.FreshGlobals,
		Session:      req.Session,
	}, h)
	if h.progress != nil {
		h.progress.stop()
	}
	telemetry.End(runSpan, err)
	if err == nil && res.SessionLost {
		lease.InterpreterEnded()
	}
	lease.Release(err == nil && res.SandboxOK)
	if err != nil {
		if errors.Is(err, pluginapi.ErrNotFound) && h.untouched() {
			return nil, fmt.Errorf("run in sandbox %s: %w: %w", lease.ID, errSandboxGone, err)
		}
		// What the program printed and called before it was stopped goes
		// to the session log and the audit all the same.
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return h.result(sandbox.ExecResult{}, lease, exec), ctx.Err()
		}
		return h.result(sandbox.ExecResult{}, lease, exec), fmt.Errorf("run in sandbox %s: %w", lease.ID, err)
	}
	return h.result(res, lease, exec), nil
}

// result is the execution as h saw it, ended with res.
func (h *host) result(res sandbox.ExecResult, lease *pool.Lease, exec *bridge.Execution) *CodeResult {
	h.mu.Lock()
	stdout, stderr := h.stdout.Bytes(), h.stderr.Bytes()
	h.mu.Unlock()
	out := &CodeResult{
		ExecResult:  res,
		Stdout:      stdout,
		Stderr:      stderr,
		SandboxID:   lease.ID,
		Warm:        lease.Reused,
		UpstreamLog: h.upstreamLog(),
		Attachments: h.att.list(),
	}
	out.InterpreterLost = h.lost
	if exec != nil {
		out.ToolCalls = exec.Calls()
		out.Summary = exec.Summary()
	}
	return out
}

// interpreterLost is the warning for a persistent execution in lease when
// the session's globals are not there: the pool ended the interpreter that
// held them (lease.Lost), or, when the pool knows nothing of them, the
// session's log says its last persistent execution ran in another sandbox,
// one this cexecd does not have.
func (x *Executor) interpreterLost(t *workspace.Tenant, req CodeRequest, lease *pool.Lease) string {
	if !req.Persistent || req.FreshSandbox || lease.Held {
		return ""
	}
	if lease.Lost != "" {
		return "this session's persistent interpreter had ended (" + lease.Lost +
			"), so the program ran in a new one, without the globals of the session's earlier executions"
	}
	was, err := t.SessionInterpreter(req.Session)
	if err != nil {
		x.Log.Warn("read where the session's interpreter is", "tenant", req.Tenant, "session", req.Session, "error", err)
	}
	if was == "" || was == lease.ID {
		return ""
	}
	return "this session's persistent interpreter is not in this cexecd (its last execution ran in sandbox " + was +
		": cexecd restarted since, or the session moved to another replica), so the program ran without the globals of its latest executions"
}

// TypeCancelled is the session log's error type of an execution whose
// request was cancelled (notifications/cancelled, a closed session).
const TypeCancelled = "Cancelled"

// logResult is what the session log keeps of an execution. One that failed
// after the program started keeps what the program printed until then.
func logResult(ctx context.Context, out *CodeResult, err error) *workspace.Result {
	if err == nil {
		r := &workspace.Result{
			OK:       out.Error == nil && out.ExitCode == 0,
			ExitCode: out.ExitCode,
			Output:   string(out.Stdout),
			Value:    out.Result,
			TimedOut: out.TimedOut,
		}
		if out.Error != nil {
			r.ErrorType, r.Error = out.Error.Type, out.Error.Message
		}
		return r
	}
	r := &workspace.Result{ErrorType: "HostError", Error: err.Error()}
	if errors.Is(err, context.Canceled) {
		r = &workspace.Result{ErrorType: TypeCancelled, Error: "the execution was cancelled (" + cancelCause(ctx) + "); the program was stopped"}
	}
	if out != nil {
		r.Output = string(out.Stdout)
	}
	return r
}

// cancelCause says why a cancelled execution's request ended.
func cancelCause(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error() // cexecd shut down, say
	}
	return "the client cancelled its request or ended its session"
}

// host is the daemon's side of one execution.
type host struct {
	req  *CodeRequest
	exec *bridge.Execution
	ws   Workspaces
	att  *attachments

	// progress is nil when nobody asked for progress.
	progress *progressReporter
	// lost is the warning that the session's globals are gone (see
	// interpreterLost).
	lost string

	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	calls          int
	logs           []workspace.UpstreamLog
}

// untouched reports that the program showed no sign of running: no output,
// no host call.
func (h *host) untouched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stdout.Len() == 0 && h.stderr.Len() == 0 && h.calls == 0
}

func (h *host) Output(stream sandbox.Stream, data []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if stream == sandbox.Stderr {
		h.stderr.Write(data)
	} else {
		h.stdout.Write(data)
	}
	if h.req.Output != nil {
		h.req.Output(stream, data)
	}
	if h.progress != nil {
		h.progress.output(stream, data)
	}
	return nil
}

func (h *host) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	if method == MethodShow {
		return h.att.show(ctx, params)
	}
	if method == bridge.MethodCallTool || method == bridge.MethodReadResource {
		if h.exec == nil {
			return nil, &sandbox.CallError{Type: bridge.TypeToolNotFound, Message: "no upstream MCP servers are configured (add mcp_server blocks to cexec.hcl)"}
		}
		return h.exec.HandleHostCall(catalog.WithCallNotices(ctx, h.notices()), method, params)
	}
	if method == MethodProgress {
		if h.progress == nil {
			// Nobody asked: the program's reports go nowhere, as prints
			// to a closed terminal would.
			return json.RawMessage("null"), nil
		}
		return h.progress.call(params)
	}
	if workspace.HandlesMethod(method) {
		return h.ws.HandleHostCall(ctx, h.req.Tenant, h.req.Session, method, params)
	}
	return nil, &sandbox.CallError{Type: "HostError", Message: fmt.Sprintf("unknown host call %q", method)}
}
