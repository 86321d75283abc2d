package bwrap

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func benchBackend(b *testing.B) *Plugin {
	p := New(nil)
	b.Cleanup(func() { _ = p.Close() })
	if cfg := os.Getenv("CEXEC_BENCH_CONFIG"); cfg != "" {
		if diags, err := p.Configure(context.Background(), []byte(cfg), sandbox.APIVersion); err != nil || diags.HasErrors() {
			b.Fatal(diags, err)
		}
	}
	caps, _ := p.Capabilities(context.Background())
	if !caps.Available {
		testutil.SkipMissing(b, "%s", caps.UnavailableReason)
	}
	return p
}

func benchCreate(b *testing.B, sb sandbox.Sandbox, id string) {
	ws := b.TempDir()
	if _, err := sb.Create(context.Background(), sandbox.CreateRequest{ID: id, Mounts: []sandbox.Mount{{Source: ws, Target: "/workspace"}}}); err != nil {
		b.Fatal(err)
	}
}

func benchExec(b *testing.B, sb sandbox.Sandbox, id string) {
	h := &plugintest.Host{}
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{SandboxID: id, Code: "print(1+1)"}, h)
	if err != nil || res.ExitCode != 0 || h.Stdout() != "2\n" {
		b.Fatalf("exec: %v %+v %q", err, res, h.Stdout())
	}
}

// reportLatency adds p50/p90/p99 in milliseconds to the benchmark output.
func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p int) float64 { return float64(lat[(len(lat)-1)*p/100].Microseconds()) / 1000 }
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(90), "p90-ms")
	b.ReportMetric(pct(99), "p99-ms")
}

// BenchmarkWarmExec measures print(1+1) in a warm sandbox, calling the
// backend directly and through in-process gRPC (what cexecd sees of the
// plugin, without its own pipeline).
func BenchmarkWarmExec(b *testing.B) {
	for _, mode := range []string{"direct", "grpc"} {
		b.Run(mode, func(b *testing.B) {
			p := benchBackend(b)
			var sb sandbox.Sandbox = p
			if mode == "grpc" {
				sb = plugintest.Sandbox(b, p)
			}
			benchCreate(b, sb, "warm")
			// Let the zygote finish its idle warm-up (preloads).
			time.Sleep(time.Second)
			benchExec(b, sb, "warm")
			bx, err := p.boxes.Get("warm")
			if err != nil {
				b.Fatal(err)
			}
			cpu0, self0 := procCPU(bx.zygotePID), selfCPU()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			gap, _ := time.ParseDuration(os.Getenv("CEXEC_BENCH_GAP"))
			for i := 0; i < b.N; i++ {
				if gap > 0 {
					b.StopTimer()
					time.Sleep(gap)
					b.StartTimer()
				}
				start := time.Now()
				benchExec(b, sb, "warm")
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportLatency(b, lat)
			// CPU time per execution, which unlike latency does not depend
			// on how busy the machine is: the sandbox's processes, and this
			// process (the plugin, and with grpc also the host's client).
			b.ReportMetric(float64((procCPU(bx.zygotePID)-cpu0).Microseconds())/1000/float64(b.N), "sandbox-cpu-ms/op")
			b.ReportMetric(float64((selfCPU()-self0).Microseconds())/1000/float64(b.N), "go-cpu-ms/op")
		})
	}
}

// BenchmarkColdExec measures creating a sandbox and running print(1+1) in
// it (destroying it is not timed), and the CPU time a sandbox costs up to
// then in its processes (bwrap, the zygote, its children; from /proc, in
// 10 ms ticks averaged over the runs), which unlike latency does not
// depend on how busy the machine is. back-to-back creates one sandbox after
// another; etc-recheck-due makes each the first after etcRecheck, as the
// first sandbox after a quiet spell is, when the host's /etc is due to be
// compared with the sandboxes' copy.
func BenchmarkColdExec(b *testing.B) {
	for _, c := range []struct {
		name   string
		etcDue bool
	}{{"back-to-back", false}, {"etc-recheck-due", true}} {
		b.Run(c.name, func(b *testing.B) { benchColdExec(b, c.etcDue) })
	}
}

func benchColdExec(b *testing.B, etcDue bool) {
	p := benchBackend(b)
	benchCreate(b, p, "first") // installs the runtime, detects cgroups
	lat := make([]time.Duration, 0, b.N)
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if etcDue {
			b.StopTimer()
			p.etc.bg.Wait()
			p.etc.mu.Lock()
			p.etc.checked = time.Time{}
			p.etc.mu.Unlock()
			b.StartTimer()
		}
		id := "cold" + strconv.Itoa(i)
		start := time.Now()
		benchCreate(b, p, id)
		benchExec(b, p, id)
		lat = append(lat, time.Since(start))
		b.StopTimer()
		bx, err := p.boxes.Get(id)
		if err != nil {
			b.Fatal(err)
		}
		// The zygote's process did bwrap's setup in the sandbox before it
		// became the zygote; its children are waited for by now.
		cpu += procCPU(bx.zygotePID) + procCPU(bx.cmd.Process.Pid)
		if err := p.Destroy(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportLatency(b, lat)
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "sandbox-cpu-ms/op")
}

// BenchmarkIdleRSS reports the resident memory of an idle warm sandbox: the
// zygote's RSS, bwrap's monitor process, the zygote's proportional share
// (PSS, its pages being shared with its fork server and spare child) and
// the PSS of the whole sandbox (what List reports).
func BenchmarkIdleRSS(b *testing.B) {
	p := benchBackend(b)
	for i := 0; i < b.N; i++ {
		id := "idle" + strconv.Itoa(i)
		benchCreate(b, p, id)
		benchExec(b, p, id)
		time.Sleep(time.Second)
		bx, err := p.boxes.Get(id)
		if err != nil {
			b.Fatal(err)
		}
		zyg := float64(procRSS(bx.zygotePID)) / (1 << 20)
		mon := float64(procRSS(bx.cmd.Process.Pid)) / (1 << 20)
		b.ReportMetric(zyg, "zygote-RSS-MiB")
		b.ReportMetric(mon, "bwrap-RSS-MiB")
		zpss, _ := procPSS(bx.zygotePID)
		b.ReportMetric(float64(zpss)/(1<<20), "zygote-PSS-MiB")
		// Everything the sandbox holds, each shared page counted once
		// across its processes (what List reports).
		total := float64(treeMemory(bx.cmd.Process.Pid, bx.zygotePID)) / (1 << 20)
		b.ReportMetric(total, "sandbox-PSS-MiB")
		if err := p.Destroy(context.Background(), id); err != nil {
			b.Fatal(err)
		}
	}
}

// procCPU is the CPU time of a process and its waited-for children.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	var ticks int64
	for _, v := range f[11:15] { // utime stime cutime cstime
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWarmThroughput runs print(1+1) in 8 warm sandboxes at once, one
// execution per sandbox at a time as the pool does, and reports executions
// per second.
func BenchmarkWarmThroughput(b *testing.B) {
	const sandboxes = 8
	p := benchBackend(b)
	ids := make(chan string, sandboxes)
	for i := 0; i < sandboxes; i++ {
		id := "tp" + strconv.Itoa(i)
		benchCreate(b, p, id)
		ids <- id
	}
	time.Sleep(time.Second)
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, sandboxes/goruntime.GOMAXPROCS(0)))
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := <-ids
			benchExec(b, p, id)
			ids <- id
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "execs/s")
}
