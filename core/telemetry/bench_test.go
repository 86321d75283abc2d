package telemetry

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/core/config"
)

// executionSpans is the daemon's own spans of one MCP execute_code with
// one tool call: the face, the execution, its five stages, the tool call
// and its upstream client span with _meta injection (the otelgrpc and
// otelhttp spans of the plugin and HTTP hops are not in it).
func executionSpans(ctx context.Context) {
	ctx, face := StartMCPServer(ctx, MethodToolsCall, "execute_code", "sess", nil, nil)
	SetScope(ctx, "acme", "s1")
	ctx, exec := StartExecution(ctx, "execute_code", "acme", "s1")
	for _, stage := range []string{SpanGuardBefore, SpanLease} {
		_, s := Start(ctx, stage)
		End(s, nil)
	}
	rctx, run := Start(ctx, SpanSandbox)
	SetWarm(run, true)
	cctx, call := StartToolCall(rctx, "acme", "web", "lookup")
	uctx, up := StartMCPClient(cctx, "web", "http", MethodToolsCall, "lookup")
	InjectMeta(uctx, nil)
	EndMCP(up, false, nil)
	EndOutcome(call, "")
	End(run, nil)
	for _, stage := range []string{SpanGuardAfter, SpanLog} {
		_, s := Start(ctx, stage)
		End(s, nil)
	}
	End(exec, nil)
	EndMCP(face, false, nil)
}

// BenchmarkExecutionSpans is what tracing adds to one execution in cexecd:
// off (no traces block) and on (exported over OTLP/gRPC to a receiver in
// the test, all sampled).
func BenchmarkExecutionSpans(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		setup(b, nil)
		b.ReportAllocs()
		for b.Loop() {
			executionSpans(context.Background())
		}
	})
	b.Run("on", func(b *testing.B) {
		_, addr := grpcReceiver(b)
		setup(b, &config.Traces{Endpoint: addr, Protocol: "grpc", SampleRatio: 1})
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			executionSpans(context.Background())
		}
		// Process CPU, the receiver's decoding included: an upper bound
		// that, unlike ns/op, other load on the machine does not inflate.
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
