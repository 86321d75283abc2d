package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/catalog"
)

// Asker puts a question to the person behind a request: the user of the
// agent's MCP client (elicitation on the agent's MCP session), or the
// operator at a `cexecctl exec` terminal. The question and answer are MCP
// elicitation's, in form or URL mode.
type Asker interface {
	// Elicit asks and waits for the answer (accept with content, decline,
	// cancel), or until ctx ends. An error wrapping ErrCannotAsk means
	// this person cannot be asked this (the client declared no
	// elicitation, or not this mode).
	Elicit(ctx context.Context, params mcp.ElicitationParams) (*mcp.ElicitationResult, error)
}

// ErrCannotAsk marks an Asker that cannot put the question.
var ErrCannotAsk = errors.New("cannot ask the user")

// upstreamAsker relays upstream servers' elicitations (core/catalog) to a
// request's Asker, saying which server asks, and records each in the
// tenant's audit log (server, mode, the user's action; never the question
// or the answer, which may hold what the user typed).
type upstreamAsker struct {
	a               Asker
	audit           Auditor
	tenant, session string
}

func (u *upstreamAsker) Elicit(ctx context.Context, server string, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	p.Message = "[MCP server " + server + "] " + p.Message
	start := time.Now()
	res, err := u.a.Elicit(ctx, p)
	if u.audit != nil {
		outcome := "error"
		if err == nil && res != nil {
			outcome = string(res.Action)
		}
		mode := p.Mode
		if mode == "" {
			mode = "form"
		}
		_ = u.audit.Record(context.WithoutCancel(ctx), u.tenant, audit.Event{Type: audit.TypeElicitation, Session: u.session,
			Actor: "upstream", Server: server, Outcome: outcome, DurationMS: float64(time.Since(start).Microseconds()) / 1000,
			Detail: map[string]string{"mode": mode}})
	}
	return res, err
}

// withAsker makes the upstream calls under ctx relay their elicitations to
// req's Asker (none leaves them with nobody to ask: they are declined).
// Each execution gets its own *upstreamAsker: the catalog takes calls with
// the same asker for one execution's.
func (x *Executor) withAsker(ctx context.Context, req CodeRequest) context.Context {
	if req.Asker == nil {
		return ctx
	}
	return catalog.WithAsker(ctx, &upstreamAsker{a: req.Asker, audit: x.Audit, tenant: req.Tenant, session: req.Session})
}
