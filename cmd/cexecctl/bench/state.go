package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// OpLatency summarises the latencies of one kind of call, in milliseconds.
type OpLatency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Min float64 `json:"min_ms"`
	Max float64 `json:"max_ms"`
}

// StateResult is the output of `cexecctl bench state --json`.
type StateResult struct {
	Tenant string `json:"tenant"`
	// Bytes is the size of the JSON value saved and loaded.
	Bytes int `json:"bytes"`
	// Save is SaveState (atomic, fsynced write), Load GetState as JSON, and
	// SaveLoad one of each back to back, all over the daemon's socket.
	Save     OpLatency `json:"save"`
	Load     OpLatency `json:"load"`
	SaveLoad OpLatency `json:"save_load"`
	// ListSessions times listing the tenant's Sessions sessions.
	ListSessions OpLatency `json:"list_sessions"`
	Sessions     int       `json:"sessions"`
	// DaemonCPUPerSaveLoadMs is cexecd's CPU time per save+load, which
	// unlike latency does not depend on how busy the machine is.
	DaemonCPUPerSaveLoadMs float64    `json:"daemon_cpu_per_save_load_ms"`
	LoadAvg                [2]float64 `json:"load_avg_1m"`
	CPUs                   int        `json:"cpus"`
}

type stateBenchFlags struct {
	n, bytes, list int
	tenant         string
}

func stateBench(env *cli.Env) *cobra.Command {
	var f stateBenchFlags
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Measure state save and load and session listing through the daemon",
		Long: `Saves and loads a JSON value of --bytes bytes --n times through the running
daemon (the state file is written atomically and fsynced, then read back and
checked), timing each call in this process, then lists the tenant's sessions
--list times. The state file is removed at the end.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.n < 1 || f.bytes < 2 || f.list < 0 {
				return cli.UsageErrorf("--n must be at least 1, --bytes at least 2 and --list at least 0")
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				p := env.Progress("bench state: save+load rounds, then session listings", int64(f.n+f.list))
				res, err := benchState(cmd.Context(), c, f, func() { p.Add(1) })
				p.Done(err)
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintJSON(res)
				}
				printState(env, res)
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.n, "n", 200, "save+load rounds")
	fl.IntVar(&f.bytes, "bytes", 100_000, "size of the JSON value")
	fl.IntVar(&f.list, "list", 20, "session listings")
	cli.TenantFlag(fl, &f.tenant)
	return cmd
}

// benchValue is a JSON object of about n bytes: records of the kind tools
// return, so that parsing it costs what real state costs.
func benchValue(n int) json.RawMessage {
	type rec struct {
		ID    int      `json:"id"`
		Name  string   `json:"name"`
		Score float64  `json:"score"`
		Tags  []string `json:"tags"`
	}
	var recs []rec
	for i := 0; ; i++ {
		v, _ := json.Marshal(map[string]any{"page": 7, "records": recs})
		if len(v) >= n {
			return v
		}
		recs = append(recs, rec{ID: i, Name: fmt.Sprintf("record %d", i), Score: float64(i) / 7, Tags: []string{"a", "b"}})
	}
}

// benchState measures; step is called after each measured round.
func benchState(ctx context.Context, c *client.Client, f stateBenchFlags, step func()) (*StateResult, error) {
	res := &StateResult{Tenant: f.tenant, CPUs: runtime.NumCPU()}
	res.LoadAvg[0] = loadAvg()
	value := benchValue(f.bytes)
	res.Bytes = len(value)
	name := fmt.Sprintf("bench-state-%d.json", os.Getpid())
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	pid := int(st.GetPid())
	// One unmeasured round creates the tenant and the file.
	if _, err := c.SaveState(ctx, f.tenant, name, value); err != nil {
		return nil, err
	}
	defer func() { _ = c.DeleteState(context.WithoutCancel(ctx), f.tenant, name) }()

	cpu0, _ := cpuMs(pid)
	var save, load, both []float64
	for range f.n {
		start := time.Now()
		if _, err := c.SaveState(ctx, f.tenant, name, value); err != nil {
			return nil, err
		}
		mid := time.Now()
		got, err := c.GetStateJSON(ctx, f.tenant, name)
		if err != nil {
			return nil, err
		}
		end := time.Now()
		if len(got) != len(value) {
			return nil, fmt.Errorf("state %s read back %d bytes, saved %d", name, len(got), len(value))
		}
		save, load, both = append(save, ms(mid.Sub(start))), append(load, ms(end.Sub(mid))), append(both, ms(end.Sub(start)))
		step()
	}
	if cpu1, err := cpuMs(pid); err == nil && cpu0 > 0 {
		res.DaemonCPUPerSaveLoadMs = (cpu1 - cpu0) / float64(f.n)
	}
	res.Save, res.Load, res.SaveLoad = opLatency(save), opLatency(load), opLatency(both)

	var list []float64
	for range f.list {
		start := time.Now()
		ss, err := c.ListSessions(ctx, f.tenant)
		if err != nil {
			return nil, err
		}
		list = append(list, ms(time.Since(start)))
		res.Sessions = len(ss)
		step()
	}
	res.ListSessions = opLatency(list)
	res.LoadAvg[1] = loadAvg()
	return res, nil
}

func opLatency(xs []float64) OpLatency {
	if len(xs) == 0 {
		return OpLatency{}
	}
	slices.Sort(xs)
	return OpLatency{N: len(xs), P50: rank(xs, 0.5), P90: rank(xs, 0.9), P99: rank(xs, 0.99), Min: xs[0], Max: xs[len(xs)-1]}
}

func printState(env *cli.Env, r *StateResult) {
	w := env.Stdout
	line := func(name string, l OpLatency) {
		fmt.Fprintf(w, "%-14s n=%-4d p50 %7.3f ms  p90 %7.3f ms  p99 %7.3f ms  max %7.3f ms\n", name, l.N, l.P50, l.P90, l.P99, l.Max)
	}
	fmt.Fprintf(w, "tenant %s, value %d bytes\n", r.Tenant, r.Bytes)
	line("save", r.Save)
	line("load", r.Load)
	line("save+load", r.SaveLoad)
	if r.ListSessions.N > 0 {
		line(fmt.Sprintf("ls %d sessions", r.Sessions), r.ListSessions)
	}
	fmt.Fprintf(w, "cexecd CPU per save+load %.3f ms; load average %.2f -> %.2f on %d CPUs\n", r.DaemonCPUPerSaveLoadMs, r.LoadAvg[0], r.LoadAvg[1], r.CPUs)
}
