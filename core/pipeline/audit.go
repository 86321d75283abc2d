package pipeline

import (
	"context"
	"time"

	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/metrics"
)

// Auditor appends to a tenant's audit log (*audit.Log).
type Auditor interface {
	Record(ctx context.Context, tenant string, events ...audit.Event) error
}

// audit records an execution, its tool calls and its policy denials in the
// tenant's audit log, in one append. Arguments and code are only hashed.
// It is written even when the caller went away: the execution happened.
func (x *Executor) audit(ctx context.Context, req CodeRequest, out *CodeResult, err error, outcome string, d time.Duration) {
	if x.Audit == nil {
		return
	}
	actor := "operator"
	if req.ModelFacing {
		actor = "agent"
	}
	ev := audit.Event{Type: audit.TypeExecution, Session: req.Session, Actor: actor, Outcome: outcome,
		DurationMS: ms(d), CodeSHA256: audit.Hash([]byte(req.Code))}
	if req.call != nil {
		ev.Server, ev.Tool = req.call.server, req.call.tool
	}
	switch {
	case outcome == metrics.OutcomeCancelled:
		// As the session log says it, not the sandbox's "context canceled".
		ev.Reason = TypeCancelled + ": " + cancelCause(ctx)
	case err != nil:
		ev.Reason = err.Error()
	case out.Error != nil:
		ev.Reason = out.Error.Type
	}
	events := []audit.Event{ev}
	deniedCalls := 0
	if out != nil {
		for _, c := range out.ToolCalls {
			events = append(events, audit.Event{Type: audit.TypeToolCall, Time: c.Start, Session: req.Session, Actor: actor,
				Server: c.Server, Tool: c.Tool, Outcome: c.Outcome(), DurationMS: ms(c.Duration), ArgsSHA256: c.ArgsSHA256, Reason: c.ErrorType})
			if c.Approval != "" {
				// The call needed approval: how it was decided.
				events = append(events, audit.Event{Type: audit.TypeApproval, Time: c.Start, Session: req.Session, Actor: actor,
					Server: c.Server, Tool: c.Tool, Outcome: c.Outcome(), ArgsSHA256: c.ArgsSHA256, Reason: c.Approval})
			}
			if c.ErrorType == bridge.TypeDenied {
				deniedCalls++
				events = append(events, audit.Event{Type: audit.TypePolicyDenial, Time: c.Start, Session: req.Session, Actor: actor,
					Server: c.Server, Tool: c.Tool, Outcome: "denied", ArgsSHA256: c.ArgsSHA256, Reason: c.Error,
					Detail: map[string]string{"what": "tool_call"}})
			}
		}
	}
	// A refused tool call the program did not catch fails the execution
	// with the same refusal: one denial, the call's.
	if out != nil && out.Error != nil && out.Error.Type == TypeDenied && deniedCalls == 0 {
		events = append(events, audit.Event{Type: audit.TypePolicyDenial, Session: req.Session, Actor: actor,
			Outcome: "denied", Reason: out.Error.Message, Detail: map[string]string{"what": "code"}})
	}
	// Record logs and counts its own failure; the execution stands.
	_ = x.Audit.Record(context.WithoutCancel(ctx), req.Tenant, events...)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
