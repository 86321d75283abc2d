package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// BenchmarkExecPrint measures the runner and fork path alone (zygote as a
// plain process, no sandbox): print(1+1) end to end through the Runner,
// and per execution the page faults and CPU time of the zygote and its
// children, which unlike latency do not depend on how busy the machine is
// (copy-on-write faults after each fork are most of an execution's cost).
// The persistent case runs in a session's long-lived interpreter, with no
// fork, for the contrast: what fork per execution costs on this machine;
// fresh-globals too, each execution in new globals and the interpreter put
// back after it (runtime/python/cexec/_fresh.py).
func BenchmarkExecPrint(b *testing.B) {
	for _, tc := range []struct {
		name string
		req  sandbox.ExecRequest
	}{
		{"fork", sandbox.ExecRequest{Code: "print(1+1)"}},
		{"persistent", sandbox.ExecRequest{Code: "print(1+1)", Persistent: true, Session: "bench"}},
		{"fresh-globals", sandbox.ExecRequest{Code: "print(1+1)", Persistent: true, FreshGlobals: true, Session: "bench"}},
	} {
		b.Run(tc.name, func(b *testing.B) { benchExec(b, tc.req) })
	}
}

func benchExec(b *testing.B, req sandbox.ExecRequest) {
	r, _ := startZygote(b, Options{})
	ctx := context.Background()
	hello, err := r.Ready(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// Let the zygote finish its idle warm-up, and start a persistent
	// interpreter before the count.
	time.Sleep(300 * time.Millisecond)
	if res, err := r.Exec(ctx, req, &recHost{}); err != nil || res.ExitCode != 0 {
		b.Fatalf("%v %+v", err, res)
	}
	lat := make([]time.Duration, 0, b.N)
	faults0, ticks0 := procUsage(b, hello.PID)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := &recHost{}
		start := time.Now()
		res, err := r.Exec(ctx, req, h)
		lat = append(lat, time.Since(start))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.StopTimer()
	faults1, ticks1 := procUsage(b, hello.PID)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(faults1-faults0)/float64(b.N), "faults/op")
	b.ReportMetric(float64(ticks1-ticks0)*10/float64(b.N), "cpu-ms/op") // USER_HZ ticks
}

// procUsage reads the minor page faults and CPU time in clock ticks of a
// zygote and its children from /proc: those it waited for (its
// executions, once reaped) and those still running (the spare, a
// persistent interpreter).
func procUsage(b *testing.B, pid int) (faults, ticks int64) {
	faults, ticks = statUsage(b, pid)
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range strings.Fields(string(kids)) {
		kid, _ := strconv.Atoi(k)
		f, t := statUsage(b, kid)
		faults, ticks = faults+f, ticks+t
	}
	return faults, ticks
}

// statUsage is one process's faults and ticks, its waited-for children
// included (0 for a process that ended meanwhile).
func statUsage(b *testing.B, pid int) (faults, ticks int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return 0, 0
	}
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name: minflt cminflt at 7 and 8, utime
	// stime cutime cstime at 11 to 14.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	n := func(i int) int64 {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return v
	}
	return n(7) + n(8), n(11) + n(12) + n(13) + n(14)
}

// BenchmarkCallLoop measures host calls through the zygote and the Runner
// alone (no sandbox, no gRPC): one program makes 1,000 call_tool calls one
// after the other, answered at once by the host with a small result and
// with a 64 KiB one; the metric is the time per call inside the program.
func BenchmarkCallLoop(b *testing.B) {
	for _, size := range []int{100, 64 << 10} {
		b.Run(fmt.Sprintf("result-%dB", size), func(b *testing.B) {
			r, _ := startZygote(b, Options{})
			reply, _ := json.Marshal(map[string]string{"text": strings.Repeat("a", size)})
			h := &recHost{fn: func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return reply, nil }}
			code := `import time
from cexec import call_tool
call_tool("s", "t", {"query": "warm"})
t0 = time.perf_counter()
for i in range(1000):
    call_tool("s", "t", {"query": "Ada", "i": i})
print((time.perf_counter() - t0) * 1000)
`
			ctx := context.Background()
			var per []float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h := &recHost{fn: h.fn}
				res, err := r.Exec(ctx, sandbox.ExecRequest{Code: code}, h)
				out, errOut := h.out()
				ms, perr := strconv.ParseFloat(strings.TrimSpace(out), 64)
				if err != nil || res.ExitCode != 0 || perr != nil {
					b.Fatalf("%v %+v %q %q", err, res, out, errOut)
				}
				per = append(per, ms) // ms per 1,000 calls = µs per call
			}
			b.StopTimer()
			sort.Float64s(per)
			b.ReportMetric(per[len(per)/2], "us/call")
		})
	}
}

// BenchmarkProgressCall measures cexec.progress() called in a tight loop:
// most calls return without a host call, as they come within 50 ms of the
// last one sent (zygote as a plain process, a host that answers at once).
func BenchmarkProgressCall(b *testing.B) {
	r, _ := startZygote(b, Options{})
	time.Sleep(300 * time.Millisecond)
	const calls = 1000
	h := &recHost{fn: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage("null"), nil
	}}
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		res, err := r.Exec(context.Background(), sandbox.ExecRequest{Code: fmt.Sprintf(
			"import cexec, time\nt = time.perf_counter()\nfor i in range(%d):\n    cexec.progress(i, %d)\nprint(time.perf_counter() - t)", calls, calls)}, h)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
		var secs float64
		if out, _ := h.out(); func() error { _, err := fmt.Sscan(out, &secs); return err }() != nil {
			b.Fatalf("program printed %q", out)
		}
		total += time.Duration(secs * float64(time.Second))
		h = &recHost{fn: h.fn}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N*calls), "us/progress")
}
