package pluginhost

import (
	"context"
	"errors"
	"io"
	"path"
	"time"

	"google.golang.org/grpc"

	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/internal/localgrpc"
)

// dialOptions are the gRPC options of one plugin's connection: the local
// window sizes, and interceptors that time every call (a stream until it
// ends) into cexec_plugin_call_duration_seconds.
func dialOptions(kind, name string) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		metrics.PluginCall(kind, name, path.Base(method), time.Since(start), err != nil)
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		start := time.Now()
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			metrics.PluginCall(kind, name, path.Base(method), time.Since(start), true)
			return nil, err
		}
		return &timedStream{ClientStream: s, kind: kind, name: name, method: path.Base(method), start: start}, nil
	}
	return append(localgrpc.DialOptions(), grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream))
}

// timedStream records its call when the stream ends: RecvMsg returns an
// error (io.EOF on a clean end).
type timedStream struct {
	grpc.ClientStream
	kind, name, method string
	start              time.Time
	done               bool
}

func (s *timedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && !s.done {
		s.done = true
		metrics.PluginCall(s.kind, s.name, s.method, time.Since(s.start), !errors.Is(err, io.EOF))
	}
	return err
}
