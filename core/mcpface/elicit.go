package mcpface

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ErrCannotElicit means the agent's MCP client cannot be asked: it
// declared no elicitation capability, or not the mode asked for.
var ErrCannotElicit = errors.New("the agent's MCP client cannot answer elicitations")

// Asker asks the user of the MCP client whose tool call is being handled,
// on that client's own session, through MCP elicitation. The daemon hands
// it to the executions the call starts, for upstream servers' elicitations
// and for approvals.
type Asker struct {
	srv *server.MCPServer
	// call is the tool handler's context: it names the client session
	// (and, on streamable HTTP, the response stream the request goes on).
	call context.Context
}

type askerKey struct{}

// withAsker returns the handler context carrying its session's Asker.
func (f *Face) withAsker(ctx context.Context) context.Context {
	return context.WithValue(ctx, askerKey{}, &Asker{srv: f.srv, call: ctx})
}

// AskerFrom returns the Asker of the MCP tool call ctx belongs to, or nil
// outside one.
func AskerFrom(ctx context.Context) *Asker {
	a, _ := ctx.Value(askerKey{}).(*Asker)
	return a
}

// CanElicit reports whether the client declared elicitation in mode
// ("form" or "url").
func (a *Asker) CanElicit(mode string) bool {
	return a.modeError(mode) == nil
}

func (a *Asker) modeError(mode string) error {
	s := server.ClientSessionFromContext(a.call)
	info, ok := s.(server.SessionWithClientInfo)
	if !ok {
		return fmt.Errorf("%w: the session keeps no client capabilities", ErrCannotElicit)
	}
	caps := info.GetClientCapabilities().Elicitation
	if mode == "" {
		mode = mcp.ElicitationModeForm
	}
	switch {
	case caps == nil:
		return fmt.Errorf("%w: it declared no elicitation capability", ErrCannotElicit)
	case mode == mcp.ElicitationModeURL && caps.URL == nil:
		return fmt.Errorf("%w: it did not declare URL mode", ErrCannotElicit)
	case mode == mcp.ElicitationModeForm && caps.Form == nil && caps.URL != nil:
		// An empty capability means form mode (the 2025-06-18 form).
		return fmt.Errorf("%w: it did not declare form mode", ErrCannotElicit)
	}
	return nil
}

// ElicitationComplete tells the client that the URL-mode elicitation id
// has completed (notifications/elicitation/complete).
func (a *Asker) ElicitationComplete(ctx context.Context, id string) error {
	return a.srv.SendElicitationComplete(a.call, server.ClientSessionFromContext(a.call), id)
}

// Elicit puts params to the client's user and waits for the answer, until
// ctx or the MCP tool call ends. It fails with ErrCannotElicit, before
// sending anything, when the client did not declare the mode.
func (a *Asker) Elicit(ctx context.Context, params mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	if err := a.modeError(params.Mode); err != nil {
		return nil, err
	}
	// The session's values with the asker's deadline: the question is
	// moot once either the call or the asker gives up.
	rctx, cancel := context.WithCancel(a.call)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	res, err := a.srv.RequestElicitation(rctx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params:  params,
	})
	if errors.Is(err, server.ErrElicitationNotSupported) || errors.Is(err, server.ErrServerInitiatedRequestUnsupported) {
		return nil, fmt.Errorf("%w: %w", ErrCannotElicit, err)
	}
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, err
}
