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
	"google.golang.org/protobuf/proto"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/ctxsleep"
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
// backend reports it (bwrap: the PSS of all of a sandbox's processes).
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
	// Persistent: warm and concurrent executions ran in their session's
	// persistent interpreter (--persistent), one session per client.
	Persistent bool   `json:"persistent,omitempty"`
	Code       string `json:"code"`
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
	// Paced: one execution at a time, PaceS apart, as an agent's turns
	// come (--paced; N 0 when not run).
	Paced Latency `json:"paced"`
	PaceS float64 `json:"pace_s,omitempty"`
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
	// All is what the whole machine spent while the phase ran (its CPUs'
	// time less idle, see machineBusyMs): cexecd and all it started
	// (plugins, sandboxes, zygotes, programs, upstream servers), the client,
	// the kernel's own threads, and whatever else ran (load_avg_1m says how
	// quiet the machine was). Summing cexecd's process tree instead missed what left
	// the tree: a recycled sandbox's processes, reparented to the host's
	// init, took their CPU time with them, and the sum could go negative.
	// 0 when cexecd runs on another machine.
	All float64 `json:"all"`
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
	paced                         int
	pace                          time.Duration
	tenant, session, code, expect string
	newSessions, persistent       bool
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
  paced    --paced executions one at a time, --pace apart, as an agent's
           turns come: what a pause costs the next execution (waking the
           processes on its path, the pool's health check of a sandbox idle
           for a second) is in these figures and not in warm's
  throughput
           --n executions from --concurrency clients at once
  cold     --cold executions one at a time, each in a fresh sandbox created
           for it and destroyed after (ExecRequest.fresh_sandbox)

With --persistent the warm-up, warm and throughput executions run in their
session's persistent interpreter (ExecRequest.persistent), as an agent's
executions do when it keeps state between them: no fork per execution.
Each concurrent client has a session of its own (--session-<n>), since a
session's interpreter runs one program at a time. Cold executions start a
sandbox and are not persistent.

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
			if f.n < 1 || f.concurrency < 1 || f.cold < 0 || f.warmup < 0 || f.paced < 0 {
				return cli.UsageErrorf("--n and --concurrency must be at least 1, --cold, --paced and --warmup at least 0")
			}
			if f.paced > 0 && f.pace <= 0 {
				return cli.UsageErrorf("--pace must be more than 0, got %s", f.pace)
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
			case f.newSessions && f.persistent:
				return cli.UsageErrorf("--persistent and --new-sessions exclude each other: a persistent interpreter serves one session")
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
	fl.IntVar(&f.paced, "paced", 0, "executions one at a time, --pace apart")
	fl.DurationVar(&f.pace, "pace", 2*time.Second, "pause before each paced execution")
	fl.IntVar(&f.concurrency, "concurrency", 8, "clients at once in the throughput phase")
	fl.IntVar(&f.warmup, "warmup", 0, "unmeasured executions first (default 4 x --concurrency)")
	cli.TenantFlag(fl, &f.tenant)
	fl.StringVar(&f.session, "session", "", "session to log every execution in, as an agent's executions share its MCP session (default bench-<UTC time>)")
	fl.BoolVar(&f.newSessions, "new-sessions", false, "log each execution in a new session of its own, as one-off \"cexecctl exec\" runs are")
	fl.BoolVar(&f.persistent, "persistent", false, "run warm and concurrent executions in their session's persistent interpreter (no fork per execution)")
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

// execRun is one `bench exec`: its phases fill res and collect the failed
// executions.
type execRun struct {
	env      *cli.Env
	c        *client.Client
	f        execBenchFlags
	req      *cexecv1.ExecRequest
	res      *ExecResult
	failures []error
}

func benchExec(ctx context.Context, env *cli.Env, c *client.Client, f execBenchFlags) (*ExecResult, error) {
	r := &execRun{env: env, c: c, f: f,
		req: &cexecv1.ExecRequest{Tenant: f.tenant, Code: f.code, Session: f.session, Persistent: f.persistent},
		res: &ExecResult{Code: f.code, Session: f.session, Persistent: f.persistent, CPUs: runtime.NumCPU()}}
	r.res.LoadAvg[0] = loadAvg()
	pids, err := r.warmUp(ctx)
	if err != nil {
		return nil, err
	}
	r.warm(ctx, pids)
	r.pacedRun(ctx)
	r.throughput(ctx)
	if err := r.pool(ctx); err != nil {
		return nil, err
	}
	r.cold(ctx)
	r.res.LoadAvg[1] = loadAvg()
	r.res.Failures = len(r.failures)
	for i, err := range r.failures {
		if i == 5 {
			fmt.Fprintf(env.Stderr, "... and %d more failures\n", len(r.failures)-i)
			break
		}
		fmt.Fprintf(env.Stderr, "cexecctl: bench exec: %v\n", err)
	}
	return r.res, ctx.Err()
}

// phase starts the progress report of a phase of n executions.
func (r *execRun) phase(n int, format string, args ...any) *cli.Progress {
	return r.env.Progress(fmt.Sprintf(format, args...), int64(n))
}

// tally keeps the failed executions of ss.
func (r *execRun) tally(ss []sample) {
	for _, s := range ss {
		if s.err != nil {
			r.failures = append(r.failures, s.err)
		}
	}
}

// warmUp waits for upstream servers, runs the unmeasured executions, waits
// for the pool and the daemon's processes to settle, and returns the pids
// of cexecd, the sandbox plugin and this process.
func (r *execRun) warmUp(ctx context.Context) ([3]int, error) {
	var pids [3]int
	waited, err := awaitServers(ctx, r.c, r.f.settle)
	if err != nil {
		return pids, err
	}
	r.res.StartWaitMs = math.Round(ms(waited)*10) / 10

	p := r.phase(r.f.warmup, "warming up: %d executions at concurrency %d", r.f.warmup, r.f.concurrency)
	ss, _ := runConcurrent(ctx, r.c, r.req, r.f, r.f.warmup, func() { p.Add(1) })
	p.Done(ctx.Err())
	r.tally(ss)
	if err := ctx.Err(); err != nil {
		return pids, err
	}
	if r.res.Tenant, err = settle(ctx, r.c, r.f.tenant, ss, r.f.settle); err != nil {
		return pids, err
	}
	if pids, err = processes(ctx, r.c); err != nil {
		return pids, err
	}
	quiet, _, err := quiesce(ctx, pids[0], r.f.settle)
	if err != nil {
		return pids, err
	}
	r.res.QuietWaitMs = math.Round(ms(quiet)*10) / 10
	return pids, nil
}

// warm runs --n executions one at a time and the CPU they cost.
func (r *execRun) warm(ctx context.Context, pids [3]int) {
	n := r.f.n
	p := r.phase(n, "warm: %d executions one at a time", n)
	cpu0 := cpuOf(pids)
	busy0, err0 := machineBusyMs()
	ss := make([]sample, 0, n)
	for range n {
		ss = append(ss, runOne(ctx, r.c, r.req, r.f.expect))
		p.Add(1)
	}
	cpu1 := cpuOf(pids)
	busy1, err1 := machineBusyMs()
	p.Done(ctx.Err())
	r.tally(ss)
	r.res.Warm = summariseSamples(ss)
	per := func(i int) float64 { return math.Round((cpu1[i]-cpu0[i])/float64(n)*1000) / 1000 }
	r.res.CPUPerExecMs = CPUPerExec{Cexecd: per(0), Plugin: per(1), Client: per(2)}
	if err0 == nil && err1 == nil && cpu0[0] > 0 {
		r.res.CPUPerExecMs.All = math.Round((busy1-busy0)/float64(n)*1000) / 1000
	}
	var program time.Duration
	for _, s := range ss {
		program += s.cpu
	}
	r.res.CPUPerExecMs.Program = math.Round(ms(program)/float64(n)*1000) / 1000
}

// pacedRun runs --paced executions one at a time, each after a pause of
// --pace.
func (r *execRun) pacedRun(ctx context.Context) {
	if r.f.paced == 0 {
		return
	}
	p := r.phase(r.f.paced, "paced: %d executions, %s apart", r.f.paced, r.f.pace)
	ss := make([]sample, 0, r.f.paced)
	for range r.f.paced {
		if ctxsleep.Sleep(ctx, r.f.pace) != nil {
			break
		}
		ss = append(ss, runOne(ctx, r.c, r.req, r.f.expect))
		p.Add(1)
	}
	p.Done(ctx.Err())
	r.tally(ss)
	r.res.Paced = summariseSamples(ss)
	r.res.PaceS = r.f.pace.Seconds()
}

// throughput runs --n executions from --concurrency clients at once.
func (r *execRun) throughput(ctx context.Context) {
	p := r.phase(r.f.n, "throughput: %d executions at concurrency %d", r.f.n, r.f.concurrency)
	ss, wall := runConcurrent(ctx, r.c, r.req, r.f, r.f.n, func() { p.Add(1) })
	p.Done(ctx.Err())
	r.tally(ss)
	r.res.Concurrent = Concurrent{Latency: summariseSamples(ss), Concurrency: r.f.concurrency, WallS: wall.Seconds()}
	if wall > 0 {
		r.res.ThroughputPerS = float64(r.f.n) / wall.Seconds()
	}
}

// pool records the pool as it stands after the warm phases: its idle
// sandboxes have each run programs and are back at rest.
func (r *execRun) pool(ctx context.Context) error {
	tenant := r.res.Tenant
	if _, err := settle(ctx, r.c, tenant, nil, r.f.settle); err != nil {
		return err
	}
	st, err := r.c.PoolStatus(ctx)
	if err != nil {
		return err
	}
	r.res.Pool = PoolFacts{Backend: st.GetBackend(), Warm: st.GetWarm(), MaxTotal: st.GetMaxTotal(),
		Target: st.GetTargets()[tenant], Idle: st.GetIdle()[tenant]}
	var rss []float64
	for _, s := range st.GetSandboxes() {
		if s.GetTenant() == tenant && s.GetState() == "idle" && s.GetRssBytes() > 0 {
			rss = append(rss, float64(s.GetRssBytes())/(1<<20))
		}
	}
	if len(rss) > 0 {
		slices.Sort(rss)
		r.res.IdleRSS = RSS{N: len(rss), P50: rank(rss, 0.5), Max: rss[len(rss)-1]}
	}
	return nil
}

// cold runs --cold executions one at a time, each in a fresh sandbox.
func (r *execRun) cold(ctx context.Context) {
	if r.f.cold == 0 {
		return
	}
	p := r.phase(r.f.cold, "cold: %d executions, each in a fresh sandbox", r.f.cold)
	defer func() { p.Done(ctx.Err()) }()
	fresh := &cexecv1.ExecRequest{Tenant: r.f.tenant, Code: r.f.code, Session: r.f.session, FreshSandbox: true}
	if r.f.persistent {
		// Not the warm phases' session: its interpreter lives in a pooled
		// sandbox.
		fresh.Session += "-cold"
	}
	ss := make([]sample, 0, r.f.cold)
	for range r.f.cold {
		s := runOne(ctx, r.c, fresh, r.f.expect)
		if s.err == nil && s.warm {
			s.err = fmt.Errorf("fresh execution ran in warm sandbox %s", s.sandbox)
		}
		ss = append(ss, s)
		p.Add(1)
	}
	r.tally(ss)
	r.res.Cold = summariseSamples(ss)
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
// client's connection, calling step after each, and returns the samples
// and the wall time.
func runConcurrent(ctx context.Context, c *client.Client, req *cexecv1.ExecRequest, f execBenchFlags, n int, step func()) ([]sample, time.Duration) {
	ss := make([]sample, n)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range min(f.concurrency, n) {
		r := req
		if f.persistent {
			// A session's interpreter runs one program at a time: each
			// client has its own, as concurrent agents do.
			r = proto.CloneOf(req)
			r.Session = fmt.Sprintf("%s-%d", req.GetSession(), w)
		}
		wg.Go(func() {
			for i := range next {
				ss[i] = runOne(ctx, c, r, f.expect)
				step()
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
	warm, conc := "warm", fmt.Sprintf("conc. %d", r.Concurrent.Concurrency)
	if r.Persistent {
		fmt.Fprintln(w, "warm and concurrent executions in persistent interpreters (--persistent)")
		warm, conc = "warm pers.", "conc. pers."
	}
	line(warm, r.Warm)
	if r.Paced.N > 0 {
		line(fmt.Sprintf("paced %gs", r.PaceS), r.Paced)
	}
	line(conc, r.Concurrent.Latency)
	line("cold", r.Cold)
	fmt.Fprintf(w, "throughput  %.0f executions/s at concurrency %d\n", r.ThroughputPerS, r.Concurrent.Concurrency)
	fmt.Fprintf(w, "CPU per warm execution: %.2f ms on the whole machine (target <= 2.5 ms); cexecd %.2f ms, sandbox plugin %.2f ms, program %.2f ms, client %.2f ms\n",
		r.CPUPerExecMs.All, r.CPUPerExecMs.Cexecd, r.CPUPerExecMs.Plugin, r.CPUPerExecMs.Program, r.CPUPerExecMs.Client)
	fmt.Fprintf(w, "idle warm sandbox memory: p50 %.1f MiB, max %.1f MiB over %d sandboxes (pool: %d idle, target %d, warm %d, max_total %d)\n",
		r.IdleRSS.P50, r.IdleRSS.Max, r.IdleRSS.N, r.Pool.Idle, r.Pool.Target, r.Pool.Warm, r.Pool.MaxTotal)
}
