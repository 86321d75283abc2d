package pluginhost

import (
	"context"
	"errors"
	"io"
	"path"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/internal/localgrpc"
)

// dialOptions are the gRPC options of one plugin's connection: the local
// window sizes, and interceptors that time every call (a stream until it
// ends) into cexec_plugin_call_duration_seconds.
func dialOptions(kind, name string) []grpc.DialOption {
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		start := time.Now()
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			metrics.PluginCall(kind, name, path.Base(method), time.Since(start), callFailed(err))
			return nil, err
		}
		ts := &timedStream{ClientStream: s, kind: kind, name: name, method: path.Base(method), start: start}
		// Callers stop reading once they have what they need (the sandbox's
		// Exec ends at its result) and cancel the stream's context: that is
		// its end too.
		context.AfterFunc(ctx, func() { ts.finish(false) })
		return ts, nil
	}
	return append(localgrpc.DialOptions(), grpc.WithChainUnaryInterceptor(unaryCallMetrics(kind, name)), grpc.WithChainStreamInterceptor(stream))
}

// unaryCallMetrics times each unary call into
// cexec_plugin_call_duration_seconds and counts the failed ones.
func unaryCallMetrics(kind, name string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		metrics.PluginCall(kind, name, path.Base(method), time.Since(start), callFailed(err))
		return err
	}
}

// callFailed says whether a plugin call's error counts as a failure. An
// optional hook the plugin does not implement (pluginapi.ErrUnimplemented)
// is an answer: the host stops asking it, and the call worked as designed.
func callFailed(err error) bool {
	return err != nil && status.Code(err) != codes.Unimplemented
}

// timedStream records its call once, when the stream ends: RecvMsg returns
// an error (io.EOF on a clean end) or the caller cancels its context.
type timedStream struct {
	grpc.ClientStream
	kind, name, method string
	start              time.Time
	once               sync.Once
}

func (s *timedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.finish(!errors.Is(err, io.EOF) && callFailed(err))
	}
	return err
}

func (s *timedStream) finish(failed bool) {
	s.once.Do(func() { metrics.PluginCall(s.kind, s.name, s.method, time.Since(s.start), failed) })
}
