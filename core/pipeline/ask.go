package pipeline

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

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
// request's Asker, saying which server asks.
type upstreamAsker struct{ a Asker }

func (u *upstreamAsker) Elicit(ctx context.Context, server string, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	p.Message = "[MCP server " + server + "] " + p.Message
	return u.a.Elicit(ctx, p)
}

// withAsker makes the upstream calls under ctx relay their elicitations to
// a (a nil Asker leaves them with nobody to ask: they are declined). Each
// execution gets its own *upstreamAsker: the catalog takes calls with the
// same asker for one execution's.
func withAsker(ctx context.Context, a Asker) context.Context {
	if a == nil {
		return ctx
	}
	return catalog.WithAsker(ctx, &upstreamAsker{a})
}
