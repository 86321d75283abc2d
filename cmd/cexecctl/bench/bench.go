// Package bench is `cexecctl bench`: measurements of cexecd itself, for the
// figures the project tracks (daemon start to socket ready, idle RSS). It is
// linked into cexecctl-bench, which cexecctl runs for it (see forward).
package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/cmd/cexecctl/task"
	"github.com/cexec/cexec/internal/tailbuf"
)

// Command returns the bench command and its subcommands (bench task is the
// task package's, beside the command it measures).
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "bench",
		Short: "Measure cexecd",
	})
	cmd.AddCommand(start(env), execBench(env), mcpBench(env), stateBench(env), toolsBench(env), tokensBench(env),
		task.BenchCommand(env))
	return cmd
}

// Stats summarises one measured quantity over all runs.
type Stats struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Run is one start of cexecd.
type Run struct {
	ReadyMs float64 `json:"ready_ms"`
	// StartCPUMs is the CPU time cexecd and its plugins had used when the
	// socket answered: the start's cost independent of machine load.
	StartCPUMs float64 `json:"start_cpu_ms"`
	// IdleCPUMsPerS is the CPU time cexecd and its plugins used per second
	// of the second half of the idle time.
	IdleCPUMsPerS float64 `json:"idle_cpu_ms_per_s"`
	IdleRSSMiB    float64 `json:"idle_rss_mib"`
	PluginsRSSMiB float64 `json:"plugins_rss_mib"`
	ShutdownMs    float64 `json:"shutdown_ms"`
	PluginsOK     int     `json:"plugins_ok"`
	PluginsTotal  int     `json:"plugins_total"`
}

// StartResult is the output of `cexecctl bench start --json`.
type StartResult struct {
	Cexecd string  `json:"cexecd"`
	Config string  `json:"config"`
	N      int     `json:"n"`
	IdleS  float64 `json:"idle_s"`
	// ReadyMs is the time from spawning cexecd until Status answers on its
	// socket (plugins are started before the socket is served).
	ReadyMs Stats `json:"ready_ms"`
	// StartCPUMs is user+system CPU of cexecd and its plugins until ready
	// (10 ms resolution per process, from /proc).
	StartCPUMs Stats `json:"start_cpu_ms"`
	// IdleCPUMsPerS is user+system CPU of cexecd and its plugins per
	// second of the second half of the idle time, once start-up work has
	// settled (10 ms resolution per process: a longer --idle sees more).
	IdleCPUMsPerS Stats `json:"idle_cpu_ms_per_s"`
	// IdleRSSMiB is cexecd's own VmRSS after IdleS seconds of idling.
	IdleRSSMiB Stats `json:"idle_rss_mib"`
	// PluginsRSSMiB is the VmRSS summed over the plugin processes.
	PluginsRSSMiB Stats `json:"plugins_rss_mib"`
	// ShutdownMs is SIGTERM until the daemon exited.
	ShutdownMs Stats `json:"shutdown_ms"`
	Runs       []Run `json:"runs"`
}

type startFlags struct {
	// extra are cexecd flags given after "--".
	extra   []string
	config  string
	cexecd  string
	n       int
	idle    time.Duration
	timeout time.Duration
}

func start(env *cli.Env) *cobra.Command {
	var f startFlags
	cmd := &cobra.Command{
		Use:   "start [-- CEXECD_FLAGS...]",
		Short: "Start cexecd N times: time to socket ready, idle CPU and RSS, shutdown time",
		Long: "Each run starts cexecd with --config on a private temporary socket and data directory,\n" +
			"polls until Status answers, idles (measuring the CPU cexecd and its plugins use in the\n" +
			"idle time's second half), reads VmRSS of cexecd and its plugins from /proc,\n" +
			"then stops it with SIGTERM. A running daemon on the default socket is not disturbed.\n" +
			"Flags after -- go to cexecd, e.g. -- -plugin-dir bin.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 && len(args) > 0 {
				return cli.UsageErrorf("unexpected argument %q; cexecd flags go after --", args[0])
			}
			f.extra = args
			if f.n < 1 {
				return cli.UsageErrorf("--n must be at least 1")
			}
			bin, err := findCexecd(f.cexecd)
			if err != nil {
				return err
			}
			cfg, err := filepath.Abs(f.config)
			if err != nil {
				return fmt.Errorf("resolve %s: %w", f.config, err)
			}
			res := StartResult{Cexecd: bin, Config: cfg, N: f.n, IdleS: f.idle.Seconds()}
			p := env.Progress("bench start: cexecd starts", int64(f.n))
			for i := range f.n {
				r, err := runOnce(cmd.Context(), bin, cfg, f)
				if err != nil {
					p.Done(err)
					return fmt.Errorf("run %d: %w", i+1, err)
				}
				res.Runs = append(res.Runs, r)
				p.Println("run %d/%d: ready %.1f ms, cexecd rss %.1f MiB, plugins %d/%d ok", i+1, f.n, r.ReadyMs, r.IdleRSSMiB, r.PluginsOK, r.PluginsTotal)
				p.Add(1)
			}
			p.Done(nil)
			res.ReadyMs = summarise(res.Runs, func(r Run) float64 { return r.ReadyMs })
			res.StartCPUMs = summarise(res.Runs, func(r Run) float64 { return r.StartCPUMs })
			res.IdleCPUMsPerS = summarise(res.Runs, func(r Run) float64 { return r.IdleCPUMsPerS })
			res.IdleRSSMiB = summarise(res.Runs, func(r Run) float64 { return r.IdleRSSMiB })
			res.PluginsRSSMiB = summarise(res.Runs, func(r Run) float64 { return r.PluginsRSSMiB })
			res.ShutdownMs = summarise(res.Runs, func(r Run) float64 { return r.ShutdownMs })
			if env.JSON {
				return env.PrintJSON(res)
			}
			last := res.Runs[len(res.Runs)-1]
			fmt.Fprintf(env.Stdout, "cexecd start -> socket ready (%d runs, %d plugins): p50 %.1f ms, p90 %.1f ms, min %.1f ms, max %.1f ms\n",
				res.N, last.PluginsTotal, res.ReadyMs.P50, res.ReadyMs.P90, res.ReadyMs.Min, res.ReadyMs.Max)
			fmt.Fprintf(env.Stdout, "CPU used by cexecd and plugins until ready: p50 %.0f ms, max %.0f ms\n", res.StartCPUMs.P50, res.StartCPUMs.Max)
			fmt.Fprintf(env.Stdout, "CPU used by cexecd and plugins while idle (the last %s): p50 %.1f ms per second, max %.1f ms\n",
				f.idle/2, res.IdleCPUMsPerS.P50, res.IdleCPUMsPerS.Max)
			fmt.Fprintf(env.Stdout, "cexecd idle RSS after %s: p50 %.1f MiB, max %.1f MiB (plugins together: p50 %.1f MiB)\n",
				f.idle, res.IdleRSSMiB.P50, res.IdleRSSMiB.Max, res.PluginsRSSMiB.P50)
			fmt.Fprintf(env.Stdout, "shutdown (SIGTERM -> exit): p50 %.1f ms, max %.1f ms\n", res.ShutdownMs.P50, res.ShutdownMs.Max)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "cexec.hcl", "config file to start cexecd with")
	fl.StringVar(&f.cexecd, "cexecd", "", "cexecd binary (default: next to cexecctl, else from PATH)")
	fl.IntVar(&f.n, "n", 10, "number of starts")
	fl.DurationVar(&f.idle, "idle", 2*time.Second, "idle time before reading RSS")
	fl.DurationVar(&f.timeout, "timeout", 15*time.Second, "give up on a start after this long")
	return cmd
}

// findCexecd prefers the cexecd built next to this binary, so `bin/cexecctl
// bench` measures `bin/cexecd` and not whatever is installed.
func findCexecd(flag string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	p, err := cli.FindBinary("cexecd")
	if err != nil {
		return "", fmt.Errorf("find cexecd (pass --cexecd): %w", err)
	}
	return p, nil
}

func runOnce(ctx context.Context, bin, cfg string, f startFlags) (Run, error) {
	dir, err := os.MkdirTemp("", "cexec-bench-")
	if err != nil {
		return Run{}, fmt.Errorf("temp dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	sock := filepath.Join(dir, "cexecd.sock")

	args := append([]string{"-config", cfg, "-socket", sock, "-data-dir", filepath.Join(dir, "data"), "-log-level", "warn"}, f.extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr := tailbuf.New(2000)
	cmd.Stderr = stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return Run{}, fmt.Errorf("start %s: %w", bin, err)
	}
	d := watch(cmd)
	// Whatever happens below, leave no daemon behind.
	defer d.stop(0)

	var r Run
	c, err := waitReady(ctx, sock, d, f.timeout)
	if err != nil {
		return Run{}, fmt.Errorf("%w\ncexecd stderr:\n%s", err, strings.TrimSpace(stderr.String()))
	}
	r.ReadyMs = ms(time.Since(t0))
	defer func() { _ = c.Close() }()
	if r.StartCPUMs, err = treeCPU(ctx, c, cmd.Process.Pid); err != nil {
		return Run{}, err
	}

	idle := func(wait time.Duration) error {
		select {
		case <-time.After(wait):
			return nil
		case <-d.done:
			return fmt.Errorf("cexecd exited while idle (%v)\ncexecd stderr:\n%s", d.err, strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := idle(f.idle / 2); err != nil {
		return Run{}, err
	}
	cpu0, err := treeCPU(ctx, c, cmd.Process.Pid)
	if err != nil {
		return Run{}, err
	}
	t := time.Now()
	if err := idle(f.idle - f.idle/2); err != nil {
		return Run{}, err
	}
	cpu1, err := treeCPU(ctx, c, cmd.Process.Pid)
	if err != nil {
		return Run{}, err
	}
	r.IdleCPUMsPerS = (cpu1 - cpu0) / time.Since(t).Seconds()
	rss, err := vmRSS(cmd.Process.Pid)
	if err != nil {
		return Run{}, err
	}
	r.IdleRSSMiB = rss
	ps, err := c.ListPlugins(ctx)
	if err != nil {
		return Run{}, err
	}
	r.PluginsTotal = len(ps)
	for _, p := range ps {
		if p.GetStatus() == "ok" {
			r.PluginsOK++
		}
		if p.GetPid() > 0 {
			if prss, err := vmRSS(int(p.GetPid())); err == nil {
				r.PluginsRSSMiB += prss
			}
		}
	}

	t1 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return Run{}, fmt.Errorf("signal cexecd: %w", err)
	}
	select {
	case <-d.done:
		r.ShutdownMs = ms(time.Since(t1))
		if d.err != nil {
			return Run{}, fmt.Errorf("cexecd did not exit cleanly on SIGTERM: %w\ncexecd stderr:\n%s", d.err, strings.TrimSpace(stderr.String()))
		}
	case <-time.After(f.timeout):
		return Run{}, fmt.Errorf("cexecd still running %s after SIGTERM", f.timeout)
	}
	if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
		return Run{}, fmt.Errorf("socket %s left behind after shutdown", sock)
	}
	return r, nil
}

// waitReady polls until Status answers on sock. The poll interval bounds the
// measurement's resolution, so it is short.
func waitReady(ctx context.Context, sock string, d *daemon, timeout time.Duration) (*client.Client, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := client.New(ctx, sock)
		if err == nil {
			if _, err = c.Status(ctx); err == nil {
				return c, nil
			}
			_ = c.Close()
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("cexecd exited before its socket was ready (%v)", d.err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("socket %s not ready after %s: %w", sock, timeout, err)
		}
	}
}

// treeCPU sums the CPU time of the daemon and its running plugins.
func treeCPU(ctx context.Context, c *client.Client, pid int) (float64, error) {
	total, err := cpuMs(pid)
	if err != nil {
		return 0, err
	}
	ps, err := c.ListPlugins(ctx)
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if p.GetPid() > 0 {
			if ms, err := cpuMs(int(p.GetPid())); err == nil {
				total += ms
			}
		}
	}
	return total, nil
}

// machineBusyMs is the CPU time, in milliseconds, this machine's CPUs
// have spent busy since an arbitrary start: their wall-clock time less what
// /proc/stat counts as idle, iowait and steal (time a hypervisor gave to
// others). The kernel keeps idle time exactly (microseconds, the current
// idle period included), where it samples busy time at its tick, 250 times
// a second on the development machine: summing the busy columns gave a
// 500-execution warm phase (about 375 samples) some ±3% of sampling error.
func machineBusyMs() (float64, error) {
	before := time.Since(busyEpoch)
	b, err := os.ReadFile("/proc/stat")
	wall := (before + time.Since(busyEpoch)) / 2
	if err != nil {
		return 0, fmt.Errorf("read machine cpu: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	f := strings.Fields(lines[0])
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("parse /proc/stat: %q", lines[0])
	}
	cpus := 0
	for _, l := range lines[1:] {
		if len(l) > 3 && strings.HasPrefix(l, "cpu") && l[3] >= '0' && l[3] <= '9' {
			cpus++
		}
	}
	var idle float64
	for _, i := range []int{4, 5, 8} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/stat: %w", err)
		}
		idle += v
	}
	return float64(wall.Microseconds())/1000*float64(cpus) - idle*1000/clockTick, nil
}

// busyEpoch is where machineBusyMs counts wall-clock time from.
var busyEpoch = time.Now()

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture Go supports.
const clockTick = 100

// cpuMs reads utime+stime of pid from /proc/<pid>/stat.
func cpuMs(pid int) (float64, error) {
	return statMs(pid, 2)
}

// statMs sums n CPU-time fields of /proc/pid/stat, from utime on (utime,
// stime, cutime, cstime), in milliseconds.
func statMs(pid, n int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu of %d: %w", pid, err)
	}
	// The command name (field 2) may contain spaces; fields after its
	// closing parenthesis are space-separated, utime being the 14th of
	// the whole line.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 11+n {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks float64
	for _, s := range f[11 : 11+n] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return ticks * 1000 / clockTick, nil
}

// vmRSS reads the resident set size of pid in MiB from /proc.
func vmRSS(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read rss of %d: %w", pid, err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "VmRSS:	   18236 kB"
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS of %d: %w", pid, err)
			}
			return kb / 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read rss of %d: %w", pid, err)
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// summarise reports nearest-rank percentiles of one field over runs.
func summarise(runs []Run, field func(Run) float64) Stats {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = field(r)
	}
	slices.Sort(xs)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return xs[max(i, 0)]
	}
	return Stats{P50: rank(0.5), P90: rank(0.9), Min: xs[0], Max: xs[len(xs)-1]}
}
