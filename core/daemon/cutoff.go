package daemon

import (
	"context"
	"errors"

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

// newCutoff returns server options that derive every call's context from
// one the returned function cancels.
func newCutoff() ([]grpc.ServerOption, context.CancelCauseFunc) {
	all, cut := context.WithCancelCause(context.Background())
	derive := func(ctx context.Context) (context.Context, func()) {
		ctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(all, func() { cancel(context.Cause(all)) })
		return ctx, func() { stop(); cancel(nil) }
	}
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, done := derive(ctx)
		defer done()
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, done := derive(ss.Context())
		defer done()
		return handler(srv, cutStream{ss, ctx})
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}, cut
}

// cutStream is a server stream with the cut-off's context.
type cutStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s cutStream) Context() context.Context { return s.ctx }
