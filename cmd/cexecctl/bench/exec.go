package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/maxprocs"
)

// defaultBenchCode is the program of the project's latency targets.
const defaultBenchCode = "print(1+1)"

// Latency summarises one phase's end-to-end latencies, measured in this
// process around each Exec call on the daemon's socket.
type Latency struct {
	N      int     `json:"n"`
	P50    float64 `json:"p50_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
	Daemon float64 `json:"daemon_p50_ms"`
	// Warm counts executions that got a warm sandbox from the pool.
	Warm int `json:"warm"`
}

// Concurrent is the throughput phase.
type Concurrent struct {
	Latency
	Concurrency int     `json:"concurrency"`
	WallS       float64 `json:"wall_s"`
}

// RSS summarises the resident memory of idle warm sandboxes as the sandbox
// backend reports it.
type RSS struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_mib"`
	Max float64 `json:"max_mib"`
}

// ExecResult is the output of `cexecctl bench exec --json`.
type ExecResult struct {
	Tenant string `json:"tenant"`
	// Session is the session every execution was logged in; "" means a
	// new one each time (--new-sessions).
	Session string `json:"session,omitempty"`
	Code    string `json:"code"`
	// StartWaitMs is how long the benchmark waited for upstream servers
	// that were still connecting (a daemon just started launches them in
	// the background, which would weigh on every figure).
	StartWaitMs float64 `json:"start_wait_ms"`
	// QuietWaitMs is how long the benchmark waited, after warming up, for
	// the daemon and everything it runs to fall quiet: sandboxes the
	// warm-up created import their preloads and fork their spares for a
	// while after they are ready.
	QuietWaitMs float64 `json:"quiet_wait_ms"`
	// Warm: one execution at a time in pooled sandboxes.
	Warm Latency `json:"warm"`
	// Cold: one execution at a time, each in a sandbox created for it and
	// destroyed after it.
	Cold Latency `json:"cold"`
	// Concurrent: the same program from Concurrency clients at once.
	Concurrent     Concurrent `json:"concurrent"`
	ThroughputPerS float64    `json:"throughput_per_s"`
	IdleRSS        RSS        `json:"idle_sandbox_rss"`
	// CPUPerExecMs is CPU time per execution in the warm phase, which
	// unlike latency does not depend on how busy the machine is.
	CPUPerExecMs CPUPerExec `json:"cpu_per_exec_ms"`
	Pool         PoolFacts  `json:"pool"`
	// LoadAvg is /proc/loadavg's 1-minute figure before and after: the
	// machine's load weighs on every figure above.
	LoadAvg  [2]float64 `json:"load_avg_1m"`
	CPUs     int        `json:"cpus"`
	Failures int        `json:"failures"`
}

// CPUPerExec splits the CPU time of one warm execution by process, from
// /proc (10 ms ticks, averaged over the phase).
type CPUPerExec struct {
	Cexecd float64 `json:"cexecd"`
	// Plugin is the sandbox plugin process, without its sandboxes.
	Plugin float64 `json:"sandbox_plugin"`
	// Program is the forked child that ran the program, as the backend
	// reports it (1 ms resolution).
	Program float64 `json:"program"`
	Client  float64 `json:"client"`
}

// PoolFacts is the pool as it stood after the warm phases.
type PoolFacts struct {
	Backend  string `json:"backend"`
	Warm     int32  `json:"warm"`
	MaxTotal int32  `json:"max_total"`
	// Target is how many sandboxes the pool kept for the tenant.
	Target int32 `json:"target"`
	Idle   int32 `json:"idle"`
}

type execBenchFlags struct {
	n, cold, concurrency, warmup  int
	tenant, session, code, expect string
	newSessions                   bool
	settle                        time.Duration
}

func execBench(env *cli.Env) *cobra.Command {
	var f execBenchFlags
	cmd := &cobra.Command{
		Use:   "exec",
		Short: "Measure executions through the daemon: warm and cold latency, throughput, idle sandbox memory",
		Long: `Runs a program (default print(1+1)) through the running daemon, end to end as
cexecctl exec does (client -> cexecd -> sandbox plugin -> sandbox -> back),
timing each execution in this process:

  warmup   --warmup executions at --concurrency, not measured, so that the
           pool holds a warm sandbox per concurrent client
  warm     --n executions one at a time, in pooled sandboxes
  throughput
           --n executions from --concurrency clients at once
  cold     --cold executions one at a time, each in a fresh sandbox created
           for it and destroyed after (ExecRequest.fresh_sandbox)

Before the phases it waits (at most --settle) for upstream servers that
are still connecting, which a daemon just started does in the background,
and after the warm-up for the daemon's processes to fall quiet (sandboxes
it created import their preloads for a while). After the phases it reads
the idle sandboxes' resident memory from the pool status. Every execution
must exit 0 (and print --expect); failures are counted and make
the command fail after printing the figures.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			maxprocs.Set() // on an execution's path, as cexecd is
			if f.n < 1 || f.concurrency < 1 || f.cold < 0 || f.warmup < 0 {
				return cli.UsageErrorf("--n and --concurrency must be at least 1, --cold and --warmup at least 0")
			}
			if !cmd.Flags().Changed("expect") && f.code != defaultBenchCode {
				f.expect = ""
			}
			if !cmd.Flags().Changed("warmup") {
				f.warmup = 4 * f.concurrency
			}
			switch {
			case f.newSessions && f.session != "":
				return cli.UsageErrorf("--session and --new-sessions exclude each other")
			case !f.newSessions && f.session == "":
				f.session = "bench-" + time.Now().UTC().Format("20060102T150405Z")
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				res, err := benchExec(cmd.Context(), env, c, f)
				if err != nil {
					return err
				}
				if env.JSON {
					err = env.PrintJSON(res)
				} else {
					printExec(env, res)
				}
				if err == nil && res.Failures > 0 {
					err = fmt.Errorf("%d executions failed", res.Failures)
				}
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.n, "n", 500, "executions in the warm phase and again in the throughput phase")
	fl.IntVar(&f.cold, "cold", 30, "executions in fresh sandboxes")
	fl.IntVar(&f.concurrency, "concurrency", 8, "clients at once in the throughput phase")
	fl.IntVar(&f.warmup, "warmup", 0, "unmeasured executions first (default 4 x --concurrency)")
	fl.StringVar(&f.tenant, "tenant", os.Getenv("CEXEC_TENANT"), "tenant to run as (default $CEXEC_TENANT, else the daemon's default tenant)")
	fl.StringVar(&f.session, "session", "", "session to log every execution in, as an agent's executions share its MCP session (default bench-<UTC time>)")
	fl.BoolVar(&f.newSessions, "new-sessions", false, "log each execution in a new session of its own, as one-off `cexecctl exec` runs are")
	fl.StringVar(&f.code, "code", defaultBenchCode, "program to run")
	fl.StringVar(&f.expect, "expect", "2\n", "stdout every execution must print (default for the default program only)")
	fl.DurationVar(&f.settle, "settle", 30*time.Second, "longest wait for upstream servers to connect, and for the pool to finish warming, before measuring")
	return cmd
}

// sample is one execution as the client saw it.
type sample struct {
	latency time.Duration
	daemon  time.Duration
	cpu     time.Duration
	warm    bool
	sandbox string
	err     error
}

func benchExec(ctx context.Context, env *cli.Env, c *client.Client, f execBenchFlags) (*ExecResult, error) {
	res := &ExecResult{Code: f.code, Session: f.session, CPUs: runtime.NumCPU()}
	res.LoadAvg[0] = loadAvg()
	progress := func(format string, args ...any) {
		if !env.JSON {
			fmt.Fprintf(env.Stderr, format+"\n", args...)
		}
	}
	waited, err := awaitServers(ctx, c, f.settle)
	if err != nil {
		return nil, err
	}
	res.StartWaitMs = math.Round(ms(waited)*10) / 10
	req := &cexecv1.ExecRequest{Tenant: f.tenant, Code: f.code, Session: f.session}
	var failures []error
	tally := func(ss []sample) {
		for _, s := range ss {
			if s.err != nil {
				failures = append(failures, s.err)
			}
		}
	}

	progress("warming up: %d executions at concurrency %d", f.warmup, f.concurrency)
	ss, _ := runConcurrent(ctx, c, req, f, f.warmup)
	tally(ss)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tenant, err := settle(ctx, c, f.tenant, ss, f.settle)
	if err != nil {
		return nil, err
	}
	res.Tenant = tenant
	pids, err := processes(ctx, c)
	if err != nil {
		return nil, err
	}
	quiet, err := quiesce(ctx, pids[0], f.settle)
	if err != nil {
		return nil, err
	}
	res.QuietWaitMs = math.Round(ms(quiet)*10) / 10

	progress("warm: %d executions one at a time", f.n)
	cpu0 := cpuOf(pids)
	ss = make([]sample, 0, f.n)
	for range f.n {
		ss = append(ss, runOne(ctx, c, req, f.expect))
	}
	cpu1 := cpuOf(pids)
	tally(ss)
	res.Warm = summariseSamples(ss)
	per := func(i int) float64 { return math.Round((cpu1[i]-cpu0[i])/float64(f.n)*1000) / 1000 }
	res.CPUPerExecMs = CPUPerExec{Cexecd: per(0), Plugin: per(1), Client: per(2)}
	var program time.Duration
	for _, s := range ss {
		program += s.cpu
	}
	res.CPUPerExecMs.Program = math.Round(ms(program)/float64(f.n)*1000) / 1000

	progress("throughput: %d executions at concurrency %d", f.n, f.concurrency)
	ss, wall := runConcurrent(ctx, c, req, f, f.n)
	tally(ss)
	res.Concurrent = Concurrent{Latency: summariseSamples(ss), Concurrency: f.concurrency, WallS: wall.Seconds()}
	if wall > 0 {
		res.ThroughputPerS = float64(f.n) / wall.Seconds()
	}

	// The pool as it stands after the warm phases: its idle sandboxes have
	// each run programs and are back at rest.
	if _, err := settle(ctx, c, tenant, nil, f.settle); err != nil {
		return nil, err
	}
	st, err := c.PoolStatus(ctx)
	if err != nil {
		return nil, err
	}
	res.Pool = PoolFacts{Backend: st.GetBackend(), Warm: st.GetWarm(), MaxTotal: st.GetMaxTotal(),
		Target: st.GetTargets()[tenant], Idle: st.GetIdle()[tenant]}
	var rss []float64
	for _, s := range st.GetSandboxes() {
		if s.GetTenant() == tenant && s.GetState() == "idle" && s.GetRssBytes() > 0 {
			rss = append(rss, float64(s.GetRssBytes())/(1<<20))
		}
	}
	if len(rss) > 0 {
		slices.Sort(rss)
		res.IdleRSS = RSS{N: len(rss), P50: rank(rss, 0.5), Max: rss[len(rss)-1]}
	}

	if f.cold > 0 {
		progress("cold: %d executions, each in a fresh sandbox", f.cold)
		fresh := &cexecv1.ExecRequest{Tenant: f.tenant, Code: f.code, Session: f.session, FreshSandbox: true}
		ss = make([]sample, 0, f.cold)
		for range f.cold {
			s := runOne(ctx, c, fresh, f.expect)
			if s.err == nil && s.warm {
				s.err = fmt.Errorf("fresh execution ran in warm sandbox %s", s.sandbox)
			}
			ss = append(ss, s)
		}
		tally(ss)
		res.Cold = summariseSamples(ss)
	}
	res.LoadAvg[1] = loadAvg()
	res.Failures = len(failures)
	for i, err := range failures {
		if i == 5 {
			fmt.Fprintf(env.Stderr, "... and %d more failures\n", len(failures)-i)
			break
		}
		fmt.Fprintf(env.Stderr, "cexecctl: bench exec: %v\n", err)
	}
	return res, ctx.Err()
}

// runOne runs req once and checks that it succeeded.
func runOne(ctx context.Context, c *client.Client, req *cexecv1.ExecRequest, expect string) sample {
	var out strings.Builder
	var r *cexecv1.ExecResult
	start := time.Now()
	for ev, err := range c.Exec(ctx, req) {
		if err != nil {
			return sample{err: err}
		}
		switch e := ev.GetEvent().(type) {
		case *cexecv1.ExecEvent_Output:
			if e.Output.GetStream() == "stdout" {
				out.Write(e.Output.GetData())
			}
		case *cexecv1.ExecEvent_Result:
			r = e.Result
		}
	}
	s := sample{latency: time.Since(start)}
	switch {
	case r == nil:
		s.err = errors.New("the daemon ended the stream without a result")
	case r.GetError() != nil:
		s.err = fmt.Errorf("program failed: %s: %s", r.GetError().GetType(), r.GetError().GetMessage())
	case r.GetExitCode() != 0:
		s.err = fmt.Errorf("program exited %d", r.GetExitCode())
	case expect != "" && out.String() != expect:
		s.err = fmt.Errorf("program printed %q, want %q", out.String(), expect)
	}
	if r != nil {
		s.daemon = time.Duration(r.GetDurationUs()) * time.Microsecond
		s.cpu = time.Duration(r.GetCpuMs()) * time.Millisecond
		s.warm = r.GetWarm()
		s.sandbox = r.GetSandboxId()
	}
	return s
}

// runConcurrent runs req n times from f.concurrency goroutines sharing the
// client's connection, and returns the samples and the wall time.
func runConcurrent(ctx context.Context, c *client.Client, req *cexecv1.ExecRequest, f execBenchFlags, n int) ([]sample, time.Duration) {
	ss := make([]sample, n)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(f.concurrency, n) {
		wg.Go(func() {
			for i := range next {
				ss[i] = runOne(ctx, c, req, f.expect)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return ss, time.Since(start)
}

// settle waits until the pool holds the tenant's target of sandboxes and
// creates none, so that measurements do not compete with warming. It
// returns the tenant: the given one, else the owner of the samples'
// sandboxes (the daemon's default when none was named).
func settle(ctx context.Context, c *client.Client, tenant string, ss []sample, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		st, err := c.PoolStatus(ctx)
		if err != nil {
			return "", err
		}
		have := 0
		for _, sb := range st.GetSandboxes() {
			for _, s := range ss {
				if tenant == "" && s.sandbox == sb.GetId() {
					tenant = sb.GetTenant()
				}
			}
			if sb.GetTenant() == tenant && !sb.GetFresh() {
				have++
			}
		}
		if st.GetCreating() == 0 && have >= int(st.GetTargets()[tenant]) || time.Now().After(deadline) {
			return tenant, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quiesce waits, at most limit, until the process tree of the daemon (pid
// root: its plugins, sandboxes and upstream servers) used less than 5% of
// a CPU over 100 ms, and returns how long it waited. Without the daemon's
// processes in sight (another machine, another pid namespace) it does not
// wait.
func quiesce(ctx context.Context, root int, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	if root <= 0 {
		return 0, nil
	}
	const window = 100 * time.Millisecond
	prev, ok := treeCPUMs(root)
	for ok && time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		cur, found := treeCPUMs(root)
		if !found || cur-prev < 0.05*ms(window) {
			break
		}
		prev = cur
	}
	return time.Since(start), nil
}

// treeCPUMs is the CPU time, in milliseconds, of process root and its
// descendants, including the children they have waited for; false when
// root cannot be read.
func treeCPUMs(root int) (float64, bool) {
	var total float64
	seen := map[int]bool{}
	var walk func(pid int) bool
	walk = func(pid int) bool {
		if seen[pid] {
			return true
		}
		seen[pid] = true
		cpu, err := statMs(pid, 4)
		if err != nil {
			return false
		}
		total += cpu
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, t := range tasks {
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
			for _, k := range strings.Fields(string(kids)) {
				if n, err := strconv.Atoi(k); err == nil {
					walk(n)
				}
			}
		}
		return true
	}
	ok := walk(root)
	return total, ok
}

// awaitServers waits, at most limit, until no upstream server is still
// connecting, and returns how long it waited.
func awaitServers(ctx context.Context, c *client.Client, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		servers, err := c.ListServers(ctx)
		if err != nil {
			return 0, err
		}
		connecting := slices.ContainsFunc(servers, func(s *cexecv1.ServerInfo) bool {
			return s.GetState() == "connecting" // core/control.ServerConnecting
		})
		if !connecting || time.Since(start) > limit {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func summariseSamples(ss []sample) Latency {
	var lat, daemon []float64
	l := Latency{}
	for _, s := range ss {
		if s.err != nil {
			continue
		}
		lat = append(lat, ms(s.latency))
		daemon = append(daemon, ms(s.daemon))
		if s.warm {
			l.Warm++
		}
	}
	if len(lat) == 0 {
		return l
	}
	slices.Sort(lat)
	slices.Sort(daemon)
	sum := 0.0
	for _, x := range lat {
		sum += x
	}
	l.N = len(lat)
	l.P50, l.P90, l.P99 = rank(lat, 0.5), rank(lat, 0.9), rank(lat, 0.99)
	l.Min, l.Max = lat[0], lat[len(lat)-1]
	l.Mean = math.Round(sum/float64(len(lat))*1000) / 1000
	l.Daemon = rank(daemon, 0.5)
	return l
}

// rank is the nearest-rank percentile p of sorted xs.
func rank(xs []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[max(i, 0)]
}

// processes returns the pids of cexecd, its sandbox plugin and this
// process, for CPU accounting (0 for one not found).
func processes(ctx context.Context, c *client.Client) ([3]int, error) {
	pids := [3]int{0, 0, os.Getpid()}
	st, err := c.Status(ctx)
	if err != nil {
		return pids, err
	}
	pids[0] = int(st.GetPid())
	pool, err := c.PoolStatus(ctx)
	if err != nil {
		return pids, err
	}
	ps, err := c.ListPlugins(ctx)
	if err != nil {
		return pids, err
	}
	for _, p := range ps {
		if p.GetKind() == "sandbox" && p.GetName() == pool.GetBackend() {
			pids[1] = int(p.GetPid())
		}
	}
	return pids, nil
}

// cpuOf reads the CPU milliseconds of each pid (0 when unreadable, as for a
// daemon on another machine).
func cpuOf(pids [3]int) [3]float64 {
	var out [3]float64
	for i, pid := range pids {
		if pid > 0 {
			out[i], _ = cpuMs(pid)
		}
	}
	return out
}

// loadAvg is the 1-minute load average, 0 when unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func printExec(env *cli.Env, r *ExecResult) {
	w := env.Stdout
	line := func(name string, l Latency) {
		fmt.Fprintf(w, "%-11s n=%-4d p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  max %7.2f ms  (daemon p50 %.2f ms, %d warm)\n",
			name, l.N, l.P50, l.P90, l.P99, l.Max, l.Daemon, l.Warm)
	}
	fmt.Fprintf(w, "%s as tenant %s on %s (%d CPUs, load %.1f -> %.1f; waited %.0f ms for upstream servers, %.0f ms for quiet)\n",
		r.Code, r.Tenant, r.Pool.Backend, r.CPUs, r.LoadAvg[0], r.LoadAvg[1], r.StartWaitMs, r.QuietWaitMs)
	line("warm", r.Warm)
	line(fmt.Sprintf("conc. %d", r.Concurrent.Concurrency), r.Concurrent.Latency)
	line("cold", r.Cold)
	fmt.Fprintf(w, "throughput  %.0f executions/s at concurrency %d\n", r.ThroughputPerS, r.Concurrent.Concurrency)
	fmt.Fprintf(w, "CPU per warm execution: cexecd %.2f ms, sandbox plugin %.2f ms, program %.2f ms, client %.2f ms\n",
		r.CPUPerExecMs.Cexecd, r.CPUPerExecMs.Plugin, r.CPUPerExecMs.Program, r.CPUPerExecMs.Client)
	fmt.Fprintf(w, "idle warm sandbox RSS: p50 %.1f MiB, max %.1f MiB over %d sandboxes (pool: %d idle, target %d, warm %d, max_total %d)\n",
		r.IdleRSS.P50, r.IdleRSS.Max, r.IdleRSS.N, r.Pool.Idle, r.Pool.Target, r.Pool.Warm, r.Pool.MaxTotal)
}
