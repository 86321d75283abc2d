package task

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// DefaultBenchTasks are answered by the default rules generator with and
// without upstream tools; pass --task to measure others.
var DefaultBenchTasks = []string{"what is 2 + 3 * 4", "sum of 1, 2, 3 and 4"}

// Stats summarises one quantity over the measured runs, in microseconds.
type Stats struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// BenchResult is the output of `cexecctl bench task --json`. Every figure
// comes from the daemon's own timings in the ExecuteTask responses, except
// RPCUs, which the client measured around each call.
type BenchResult struct {
	N      int      `json:"n"`
	Warmup int      `json:"warmup"`
	Tasks  []string `json:"tasks"`
	// Generators counts which generator wrote the measured programs.
	Generators map[string]int `json:"generators"`
	// PipelineOverheadUs is the time outside the generators and the
	// executions: search, workspace listing, guards, bookkeeping.
	PipelineOverheadUs Stats `json:"pipeline_overhead_us"`
	SearchUs           Stats `json:"search_us"`
	GenerateUs         Stats `json:"generate_us"`
	GuardUs            Stats `json:"guard_us"`
	ExecuteUs          Stats `json:"execute_us"`
	TotalUs            Stats `json:"total_us"`
	RPCUs              Stats `json:"rpc_us"`
}

// BenchCommand returns `bench task`, for the bench noun.
func BenchCommand(env *cli.Env) *cobra.Command {
	var (
		n, warmup int
		tasks     []string
		tenant    string
	)
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Measure execute_task's pipeline overhead (besides generation and execution) through a running cexecd",
		Long: `Run tasks through a running cexecd's ExecuteTask, one after another, and
summarise the daemon's own timings: the pipeline overhead (everything but the
generator calls and the executions), search, generation, guards, execution and
the whole call. The tasks cycle; every measured run must succeed. The default
tasks are answered by the offline rules generator.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n < 1 || warmup < 0 || len(tasks) == 0 {
				return cli.UsageErrorf("--n must be at least 1, --warmup not negative, and there must be a task")
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				p := env.Progress("bench task: execute_task runs", int64(warmup+n))
				res, err := benchTasks(cmd, c, tasks, tenant, n, warmup, func() { p.Add(1) })
				p.Done(err)
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintJSON(res)
				}
				printBench(env, res)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&n, "n", 100, "measured runs")
	f.IntVar(&warmup, "warmup", 5, "runs before measuring (warm sandboxes, plugin connections)")
	f.StringArrayVar(&tasks, "task", DefaultBenchTasks, "task to run (repeat for several; they cycle)")
	cli.TenantFlag(f, &tenant)
	return cmd
}

// benchTasks runs the tasks; step is called after each run.
func benchTasks(cmd *cobra.Command, c *client.Client, tasks []string, tenant string, n, warmup int, step func()) (*BenchResult, error) {
	res := &BenchResult{N: n, Warmup: warmup, Tasks: tasks, Generators: map[string]int{}}
	var overhead, search, generate, guard, execute, total, rpc []float64
	for i := range warmup + n {
		task := tasks[i%len(tasks)]
		start := time.Now()
		r, err := c.ExecuteTask(cmd.Context(), &cexecv1.ExecuteTaskRequest{Tenant: tenant, Task: task})
		elapsed := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("run %d (%q): %w", i+1, task, err)
		}
		if r.GetStatus() != statusOK {
			return nil, fmt.Errorf("run %d (%q) ended %s: %s", i+1, task, r.GetStatus(), failureText(r))
		}
		step()
		if i < warmup {
			continue
		}
		res.Generators[r.GetGenerator()]++
		tm := r.GetTimings()
		overhead = append(overhead, float64(r.GetPipelineOverheadUs()))
		search = append(search, float64(tm.GetSearchUs()))
		generate = append(generate, float64(tm.GetGenerateUs()))
		guard = append(guard, float64(tm.GetGuardUs()))
		execute = append(execute, float64(tm.GetExecuteUs()))
		total = append(total, float64(tm.GetTotalUs()))
		rpc = append(rpc, float64(elapsed.Microseconds()))
	}
	res.PipelineOverheadUs = summarise(overhead)
	res.SearchUs = summarise(search)
	res.GenerateUs = summarise(generate)
	res.GuardUs = summarise(guard)
	res.ExecuteUs = summarise(execute)
	res.TotalUs = summarise(total)
	res.RPCUs = summarise(rpc)
	return res, nil
}

func failureText(r *cexecv1.ExecuteTaskResponse) string {
	if e := r.GetResult().GetError(); e != nil {
		return e.GetType() + ": " + e.GetMessage()
	}
	var parts []string
	for _, d := range r.GetDiagnostics() {
		parts = append(parts, cli.FormatDiagnostic(d))
	}
	return fmt.Sprint(parts)
}

// summarise takes nearest-rank percentiles.
func summarise(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Stats{P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Min: s[0], Max: s[len(s)-1]}
}

func printBench(env *cli.Env, r *BenchResult) {
	w := env.Stdout
	fmt.Fprintf(w, "%d runs after %d warm-up, tasks %q, generators %v\n", r.N, r.Warmup, r.Tasks, r.Generators)
	fmt.Fprintf(w, "%-18s %9s %9s %9s %9s %9s\n", "µs", "p50", "p90", "p99", "min", "max")
	for _, row := range []struct {
		name string
		s    Stats
	}{
		{"pipeline overhead", r.PipelineOverheadUs}, {"search", r.SearchUs}, {"generate", r.GenerateUs},
		{"guard", r.GuardUs}, {"execute", r.ExecuteUs}, {"total", r.TotalUs}, {"rpc (client)", r.RPCUs},
	} {
		fmt.Fprintf(w, "%-18s %9.0f %9.0f %9.0f %9.0f %9.0f\n", row.name, row.s.P50, row.s.P90, row.s.P99, row.s.Min, row.s.Max)
	}
}
