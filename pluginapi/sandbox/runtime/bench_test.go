package runtime

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// BenchmarkExecPrint measures the runner and fork path alone (zygote as a
// plain process, no sandbox): print(1+1) end to end through the Runner.
func BenchmarkExecPrint(b *testing.B) {
	r, _ := startZygote(b, Options{})
	ctx := context.Background()
	// Let the zygote finish its idle warm-up.
	time.Sleep(300 * time.Millisecond)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := &recHost{}
		start := time.Now()
		res, err := r.Exec(ctx, sandbox.ExecRequest{Code: "print(1+1)"}, h)
		lat = append(lat, time.Since(start))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
