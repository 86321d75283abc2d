package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Asker puts an upstream server's elicitation to the user behind the call
// that caused it (the agent's MCP client, a terminal). It returns the
// user's answer; an error means nobody could be asked, and the server gets
// a decline.
//
// Calls carrying the same Asker (compared with ==, so use a pointer) are
// taken for one agent's: a request that names no call may go to it when
// they are the only calls in flight on a connection.
type Asker interface {
	Elicit(ctx context.Context, server string, params mcp.ElicitationParams) (*mcp.ElicitationResult, error)
}

type askerKey struct{}

// WithAsker returns ctx carrying the asker of the calls made with it:
// Call hands an elicitation that arrives during such a call to a.
func WithAsker(ctx context.Context, a Asker) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, askerKey{}, a)
}

func askerFrom(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}

// inflight is the calls in progress on one connection. A server request
// names no call on stdio (nor on the HTTP GET stream), so an elicitation
// arriving there is attributed to the connection's calls: it goes to their
// asker only when they all share one, since a shared server serves every
// tenant's and every agent's calls at once.
type inflight struct {
	mu    sync.Mutex
	calls map[*callSlot]struct{}
}

// callSlot is one call in progress: its asker (nil: nobody to ask), its
// context, which bounds the wait for an answer, and what became of the
// elicitations made during it.
type callSlot struct {
	asker Asker
	ctx   context.Context

	mu sync.Mutex
	// refused says why the call's last elicitation got no answer from the
	// user (declined, cancelled, nobody to ask); the call then fails with
	// it, whatever the server makes of the refusal.
	refused string
}

func (s *callSlot) refuse(why string) {
	s.mu.Lock()
	s.refused = why
	s.mu.Unlock()
}

func (s *callSlot) answer(action mcp.ElicitationResponseAction) {
	switch action {
	case mcp.ElicitationResponseActionDecline:
		s.refuse("the user declined to answer")
	case mcp.ElicitationResponseActionCancel:
		s.refuse("the user cancelled the request")
	default:
		s.refuse("")
	}
}

// err is the call's failure when an elicitation went unanswered.
func (s *callSlot) err(server string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == "" {
		return nil
	}
	return fmt.Errorf("server %s asked for input during the call and %s", server, s.refused)
}

type slotKey struct{}

// track registers a call with its asker and returns the context to make
// it with, which names the call to the elicitation handler.
func (f *inflight) track(ctx context.Context) (context.Context, *callSlot, func()) {
	s := &callSlot{asker: askerFrom(ctx)}
	ctx = context.WithValue(ctx, slotKey{}, s)
	s.ctx = ctx
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[*callSlot]struct{}{}
	}
	f.calls[s] = struct{}{}
	f.mu.Unlock()
	return ctx, s, func() {
		f.mu.Lock()
		delete(f.calls, s)
		f.mu.Unlock()
	}
}

// only returns the call in progress, when there is one, or the only one
// with an asker when all calls in progress share it.
func (f *inflight) only() (*callSlot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var one *callSlot
	for s := range f.calls {
		switch {
		case one == nil:
			one = s
		case one.asker == nil || s.asker == nil || one.asker != s.asker:
			return nil, errAmbiguous
		}
	}
	if one == nil {
		return nil, errors.New("no call is in progress on this connection")
	}
	return one, nil
}

var errAmbiguous = errors.New("several calls are in progress on this connection, not all the same agent's, and the request does not say which one it belongs to")

// elicitor is a connection's elicitation handler (mcp-go's
// client.ElicitationHandler): it relays the request to the asker of the
// call that caused it and declines when there is none.
type elicitor struct {
	u     *upstream
	calls *inflight
}

// Elicit finds the call: the one in ctx when mcp-go handed over the call's
// own context (a request on the call's HTTP response stream, a multi
// round-trip input request), else the connection's only call (or calls of
// one asker). Failing that, it declines: an upstream must never show its
// question to, or get an answer from, another agent's user.
func (e elicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	s, _ := ctx.Value(slotKey{}).(*callSlot)
	if s == nil {
		var err error
		if s, err = e.calls.only(); err != nil {
			e.u.log.Warn("elicitation declined: it cannot be attributed to one call", "reason", err)
			return decline(), nil
		}
	}
	if s.asker == nil {
		s.refuse("nobody could be asked (the client that started the call cannot answer; cexec declined for it)")
		return decline(), nil
	}
	// The answer is worth waiting for only while the call lasts.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	res, err := s.asker.Elicit(ctx, e.u.cfg.Name, req.Params)
	switch {
	case err != nil && ctx.Err() != nil:
		// The call ended, or the transport's own bound on answering a
		// server request (30 s for streamable HTTP in mcp-go) passed.
		e.u.log.Info("elicitation declined: no answer in time", "reason", err)
		s.refuse("the user did not answer in time; cexec declined for the user")
		return decline(), nil
	case err != nil:
		e.u.log.Info("elicitation declined: nobody could be asked", "reason", err)
		s.refuse(fmt.Sprintf("nobody could be asked (%v); cexec declined for the user", err))
		return decline(), nil
	}
	s.answer(res.Action)
	return res, nil
}

func decline() *mcp.ElicitationResult {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
}

// elicitationCapability is what cexec declares to upstreams: both modes,
// relayed to whoever the call's asker reaches.
func elicitationCapability() mcp.ClientCapabilities {
	return mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}
}

// samplingRefused is the error an upstream's sampling/createMessage gets.
const samplingRefused = "cexec does not relay sampling (deprecated by the MCP specification; not declared in this client's capabilities)"

// refuseSampling wraps a transport's handler of server requests so that a
// server asking for sampling, which cexec does not declare, gets a clear
// refusal rather than a generic one.
func refuseSampling(h transport.RequestHandler) transport.RequestHandler {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if req.Method == string(mcp.MethodSamplingCreateMessage) {
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, samplingRefused, nil), nil
		}
		return h(ctx, req)
	}
}

func (t tappedStdio) SetRequestHandler(h transport.RequestHandler) {
	t.Stdio.SetRequestHandler(refuseSampling(h))
}

func (t tappedHTTP) SetRequestHandler(h transport.RequestHandler) {
	t.StreamableHTTP.SetRequestHandler(refuseSampling(h))
}
