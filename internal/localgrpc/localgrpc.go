// Package localgrpc holds the gRPC options of cexec's local connections:
// cexecctl to cexecd on the control socket, and cexecd to its plugins.
package localgrpc

import "google.golang.org/grpc"

// Fixed flow-control windows. Without them gRPC estimates the connection's
// bandwidth-delay product by answering a received data frame with a ping
// whenever none is in flight. On a unix socket that measures nothing, and
// it costs every short stream (one execution, one guard call) an extra
// round trip between the two processes: about a tenth of a millisecond of
// latency per hop and two more wake-ups on each side. The sizes are large
// enough that a stream never waits for a window update on a local socket
// (an execution's output is capped at a few MiB by default).
const (
	StreamWindow = 4 << 20
	ConnWindow   = 16 << 20
)

// StreamWorkers is how many goroutines of a local server take its streams
// in turn. Without them gRPC starts a goroutine per stream, and every
// execution's handler grows that fresh stack again through ExecuteCode
// (runtime.morestack was about 6% of cexecd's and the sandbox plugin's CPU
// per execution). A stream that finds every worker busy gets its own
// goroutine as before, so no stream waits for another.
const StreamWorkers = 8

// ServerOptions are the options of a gRPC server on a local socket.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(StreamWindow),
		grpc.InitialConnWindowSize(ConnWindow),
		grpc.NumStreamWorkers(StreamWorkers),
	}
}

// DialOptions are the options of a gRPC client of a local socket.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(StreamWindow),
		grpc.WithInitialConnWindowSize(ConnWindow),
	}
}
