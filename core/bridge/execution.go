package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cexec/cexec/core/telemetry"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// DefaultMaxCalls is the tool call limit of an execution whose options set
// none.
const DefaultMaxCalls = 10000

// MethodCallTool is the runtime's host call method for call_tool.
const MethodCallTool = "call_tool"

// ExecOptions configure one execution's use of the bridge.
type ExecOptions struct {
	// Tenant is whose execution it is: a tenant-scoped server's calls go
	// to this tenant's instance.
	Tenant string
	// MaxCalls bounds the tool calls of the execution; <= 0 means
	// DefaultMaxCalls. Calls past it fail with TypeCallLimit.
	MaxCalls int
	// AllowedServers limits the servers the execution may call (a
	// tenant's allowed_servers); nil allows all. Others look unknown.
	AllowedServers []string
	// Before, when set, runs before validation on every call that found its
	// tool, and may rewrite the arguments: the place for untokenizing PII
	// tokens and for guards' CheckToolCall. An error stops the call; a
	// *sandbox.CallError reaches the program as it is, any other error as a
	// ToolError with its message.
	Before func(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error)
	// SignIn, when set, is offered each call refused for want of an OAuth
	// sign-in (signin.go).
	SignIn SignInFunc
}

// CallRecord is one tool call of an execution.
type CallRecord struct {
	Server   string        `json:"server"`
	Tool     string        `json:"tool"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration_ns"`
	OK       bool          `json:"ok"`
	// ErrorType and Error describe a failed call (a CallError's type and
	// message; "Canceled" when the execution's context ended).
	ErrorType string `json:"error_type,omitempty"`
	Error     string `json:"error,omitempty"`
	// Approval says how a call that needed approval was decided.
	Approval string `json:"approval,omitempty"`
	// ArgsSHA256 is the hex sha256 of the arguments as the program sent
	// them, for the audit log, which never holds arguments themselves.
	ArgsSHA256 string `json:"args_sha256,omitempty"`
}

// Execution is one program run's view of the bridge: it counts, limits and
// records the program's tool calls. Safe for concurrent use (programs may
// call from threads).
type Execution struct {
	b    *Bridge
	opts ExecOptions

	mu      sync.Mutex
	calls   []CallRecord
	started int
	refused int
}

// NewExecution starts the bookkeeping of one execution.
func (b *Bridge) NewExecution(opts ExecOptions) *Execution {
	if opts.MaxCalls <= 0 {
		opts.MaxCalls = DefaultMaxCalls
	}
	return &Execution{b: b, opts: opts}
}

// CallTool is Bridge.CallTool within the execution's limit and allowed
// servers, recorded.
func (e *Execution) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	e.mu.Lock()
	if e.started >= e.opts.MaxCalls {
		e.refused++
		e.mu.Unlock()
		return nil, &sandbox.CallError{Type: TypeCallLimit, Message: fmt.Sprintf(
			"this execution reached its limit of %d tool calls; %s/%s was not called", e.opts.MaxCalls, server, tool)}
	}
	e.started++
	e.mu.Unlock()

	ctx, span := telemetry.StartToolCall(ctx, e.opts.Tenant, server, tool)
	start := time.Now()
	called := &Called{}
	out, known, err := e.call(WithCalled(ctx, called), server, tool, args)
	rec := CallRecord{Server: server, Tool: tool, Start: start, Duration: time.Since(start), OK: err == nil, Approval: called.note(),
		ArgsSHA256: argsHash(args)}
	if err != nil {
		var ce *sandbox.CallError
		if errors.As(err, &ce) {
			rec.ErrorType, rec.Error = ce.Type, ce.Message
		} else {
			rec.ErrorType, rec.Error = "Canceled", err.Error()
		}
	}
	rec.record(known)
	telemetry.EndOutcome(span, rec.ErrorType)
	e.mu.Lock()
	e.calls = append(e.calls, rec)
	e.mu.Unlock()
	return out, err
}

// call makes the call; known says whether the catalog has the tool, so
// that metrics label only real servers and tools.
func (e *Execution) call(ctx context.Context, server, tool string, args json.RawMessage) (_ json.RawMessage, known bool, _ error) {
	t, err := e.b.lookup(server, tool, e.opts.AllowedServers)
	if err != nil {
		return nil, t.ID != "", err
	}
	if c := CalledFrom(ctx); c != nil {
		c.Tool = t
	}
	// Before the guards too: they would scan an oversized argument in full.
	if err := e.b.checkArgument(t.ID, server, len(args)); err != nil {
		return nil, true, err
	}
	if e.opts.Before != nil {
		args, err = e.opts.Before(ctx, server, tool, args)
		if err != nil {
			var ce *sandbox.CallError
			if errors.As(err, &ce) {
				return nil, true, ce
			}
			return nil, true, &sandbox.CallError{Type: TypeToolError, Message: err.Error()}
		}
	}
	out, err := e.b.call(ctx, e.opts.Tenant, t, args, e.opts.SignIn)
	return out, true, err
}

// callToolParams are the params of the runtime's call_tool host call.
type callToolParams struct {
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// HandleHostCall serves the runtime's host calls that belong to the bridge:
// method "call_tool" with params {"server", "tool", "arguments"}, and
// "read_resource" with params {"server", "uri"}. Other
// methods return an error wrapping pluginapi.ErrUnimplemented, so an
// executor can chain handlers.
func (e *Execution) HandleHostCall(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if method == MethodReadResource {
		return e.handleReadResource(ctx, params)
	}
	if method != MethodCallTool {
		return nil, fmt.Errorf("host call %q: %w", method, pluginapi.ErrUnimplemented)
	}
	var p callToolParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: fmt.Sprintf("call_tool: malformed params: %v", err)}
	}
	if p.Server == "" || p.Tool == "" {
		return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: "call_tool: server and tool must be non-empty strings"}
	}
	return e.CallTool(ctx, p.Server, p.Tool, p.Arguments)
}

// Calls returns the recorded calls in the order they finished.
func (e *Execution) Calls() []CallRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// Summary is what an execution result says about its tool calls.
type Summary struct {
	// Calls counts the calls made (Failed of them failed); Refused counts
	// the calls refused by the limit, which are not in Tools.
	Calls   int `json:"calls"`
	Failed  int `json:"failed"`
	Refused int `json:"refused,omitempty"`
	// TotalMS is the time spent in tool calls, summed.
	TotalMS float64       `json:"total_ms"`
	Tools   []ToolSummary `json:"tools,omitempty"`
}

// ToolSummary sums the calls of one tool.
type ToolSummary struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Calls  int    `json:"calls"`
	Failed int    `json:"failed"`
	// TotalMS and MaxMS are the summed and the longest call time.
	TotalMS float64 `json:"total_ms"`
	MaxMS   float64 `json:"max_ms"`
	// LastError is the message of the tool's last failed call.
	LastError string `json:"last_error,omitempty"`
}

// Summary sums the recorded calls per tool, in order of first call.
func (e *Execution) Summary() Summary {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Summary{Calls: len(e.calls), Refused: e.refused}
	index := map[[2]string]int{}
	for _, c := range e.calls {
		k := [2]string{c.Server, c.Tool}
		i, ok := index[k]
		if !ok {
			i = len(s.Tools)
			index[k] = i
			s.Tools = append(s.Tools, ToolSummary{Server: c.Server, Tool: c.Tool})
		}
		ms := float64(c.Duration) / float64(time.Millisecond)
		t := &s.Tools[i]
		t.Calls++
		t.TotalMS += ms
		t.MaxMS = max(t.MaxMS, ms)
		s.TotalMS += ms
		if !c.OK {
			t.Failed++
			t.LastError = c.Error
			s.Failed++
		}
	}
	return s
}
