package daemon

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
)

// errShutDown is the cause of the calls still running when shutdown's
// grace ran out: the session log says cexecd shut down, rather than that
// the client cancelled.
var errShutDown = errors.New("cexecd shut down during the call")

// controlServer is the control API's gRPC server, whose calls' contexts
// cut (with a cause) ends before the server cuts their streams.
type controlServer struct {
	*grpc.Server
	cut context.CancelCauseFunc
}

// cutoff holds the cancel functions of the calls in flight, so that cut
// ends each one's context with its cause before it returns: the server's
// Stop, which follows, cancels them too, with no cause.
type cutoff struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]context.CancelCauseFunc
}

// newCutoff returns server options that derive every call's context so
// that the returned function ends them all, with a cause.
func newCutoff() ([]grpc.ServerOption, context.CancelCauseFunc) {
	c := &cutoff{calls: map[uint64]context.CancelCauseFunc{}}
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, done := c.derive(ctx)
		defer done()
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, done := c.derive(ss.Context())
		defer done()
		return handler(srv, cutStream{ss, ctx})
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}, c.cut
}

func (c *cutoff) derive(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	id := c.next
	c.next++
	c.calls[id] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		cancel(nil)
	}
}

func (c *cutoff) cut(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.calls {
		cancel(cause)
	}
}

// cutStream is a server stream with the cut-off's context.
type cutStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s cutStream) Context() context.Context { return s.ctx }
