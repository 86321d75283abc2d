package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// ToolsResult is the output of `cexecctl bench tools --json`.
type ToolsResult struct {
	// Loop1000Ms is the p50 over Rounds executions of the time one program
	// took for 1,000 call_tool calls, measured inside the program, through
	// the daemon (sandbox -> cexecd -> upstream over bwrap's host call
	// socket; other backends relay through the sandbox plugin). The
	// program makes the calls from LoopThreads threads, as a program should
	// make calls that do not depend on each other: one at a time, each call
	// waits for the upstream's round trip, which alone takes about as long
	// as the whole budget (Loop1000DirectMs).
	Loop1000Ms  float64 `json:"loop_1000_ms"`
	LoopThreads int     `json:"loop_threads"`
	// Loop1000ExecMs is the whole execution as the daemon timed it (p50).
	Loop1000ExecMs float64 `json:"loop_1000_exec_ms"`
	// Loop1000SequentialMs is the same program with the calls made one
	// after the other in a plain loop (p50).
	Loop1000SequentialMs float64 `json:"loop_1000_sequential_ms"`
	// Loop1000DirectMs is 1,000 mcp-go client calls one after the other from
	// this process to a server-memory of its own: the upstream's share of
	// the sequential loop. Loop1000DirectConcurrentMs makes them from
	// LoopThreads goroutines.
	Loop1000DirectMs           float64 `json:"loop_1000_direct_ms"`
	Loop1000DirectConcurrentMs float64 `json:"loop_1000_direct_concurrent_ms"`
	// CallOverheadMs is what cexec adds to one sequential call over the
	// direct mcp-go client: the p50 over Rounds of (sequential loop -
	// direct loop) / 1,000, each round's direct loop run right after its
	// sequential one, so both see the same load.
	CallOverheadMs float64 `json:"call_overhead_ms"`
	// Loop1000CPUMs is CPU time per loop of 1,000 calls from LoopThreads
	// threads, by process (from /proc; 10 ms ticks): unlike wall time it
	// does not grow when the machine is busy.
	Loop1000CPUMs LoopCPU `json:"loop_1000_cpu_ms"`
	Rounds        int     `json:"rounds"`
	// Daemon is "private" (started by the benchmark) or the socket of the
	// running daemon used with --daemon.
	Daemon  string     `json:"daemon"`
	LoadAvg [2]float64 `json:"load_avg_1m"`
	CPUs    int        `json:"cpus"`
}

// LoopCPU splits the CPU of one 1,000-call loop by process.
type LoopCPU struct {
	Cexecd   float64 `json:"cexecd"`
	Plugin   float64 `json:"sandbox_plugin"`
	Upstream float64 `json:"upstream"`
	// Program is the sandboxed child, as the backend reports it.
	Program float64 `json:"program"`
}

type toolsFlags struct {
	memory    string
	cexecd    string
	pluginDir string
	server    string
	useDaemon bool
	rounds    int
	threads   int
	timeout   time.Duration
}

func toolsBench(env *cli.Env) *cobra.Command {
	var f toolsFlags
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Measure 1,000 call_tools in one execution through a daemon against an mcp-go client",
		Long: `1,000 call_tool calls in one execution, through a daemon:

  loop_1000_ms        one program run through a daemon that makes 1,000
                      call_tool("memory", "search_nodes", ...) calls from
                      --threads threads, timed inside the program; --rounds
                      runs, p50. loop_1000_sequential_ms is the same calls
                      in a plain loop, and the direct figures are an mcp-go
                      client making them from this process (one after the
                      other, and from --threads goroutines).
                      By default a private cexecd is started (bwrap sandbox,
                      server-memory); --daemon uses the running one and its
                      --server instead.

The daemon's own work per call and stub generation are Go benchmarks:
go test -bench 'CallToolOverhead|BridgeOwnWork' ./core/bridge and
go test -bench GenerateLiveMCPBench ./core/catalog/stubgen.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.rounds < 1 || f.threads < 1 {
				return cli.UsageErrorf("--rounds and --threads must be at least 1")
			}
			res, err := benchTools(cmd.Context(), env, f)
			if err != nil {
				return err
			}
			if env.JSON {
				return env.PrintJSON(res)
			}
			printTools(env, res)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.memory, "memory-server", "", "mcp-server-memory binary (default: test/peers/node_modules/.bin/mcp-server-memory of the repository, else from PATH)")
	fl.StringVar(&f.cexecd, "cexecd", "", "cexecd binary for the private daemon (default: next to cexecctl, else from PATH)")
	fl.StringVar(&f.pluginDir, "plugin-dir", "", "plugin_dir of the private daemon (default: the directory of cexecd)")
	fl.BoolVar(&f.useDaemon, "daemon", false, "run the loop on the running daemon (--address) instead of a private one")
	fl.StringVar(&f.server, "server", "memory", "with --daemon: the server-memory's name in the daemon's cexec.hcl")
	fl.IntVar(&f.rounds, "rounds", 3, "executions of the 1,000-call program")
	fl.IntVar(&f.threads, "threads", 8, "threads the 1,000-call program makes its calls from")
	fl.DurationVar(&f.timeout, "timeout", 60*time.Second, "give up on the private daemon's start after this long")
	return cmd
}

func benchTools(ctx context.Context, env *cli.Env, f toolsFlags) (*ToolsResult, error) {
	res := &ToolsResult{Rounds: f.rounds, LoopThreads: f.threads, CPUs: runtime.NumCPU()}
	res.LoadAvg[0] = loadAvg()
	mem, err := findPeer(f.memory, "mcp-server-memory")
	if err != nil {
		return nil, err
	}

	p := env.Progress("bench tools: 1,000 calls from an mcp-go client in this process", 0)
	direct, err := startDirect(ctx, mem)
	if err == nil {
		defer direct.close()
		res.Loop1000DirectConcurrentMs, err = direct.concurrent(ctx, f.threads)
	}
	p.Done(err)
	if err != nil {
		return nil, err
	}

	// Each round is two executions (sequential and threaded), plus one
	// unmeasured of each.
	p = env.Progress(fmt.Sprintf("bench tools: 1,000 call_tool in one execution, %d rounds", f.rounds), int64(2*f.rounds+2))
	step := func() { p.Add(1) }
	if f.useDaemon {
		res.Daemon = client.SocketPath(env.Address)
		if res.Daemon == "" {
			res.Daemon = client.DefaultAddress()
		}
		err = env.Do(ctx, func(c *client.Client) error { return benchLoop(ctx, c, direct, f.server, f.rounds, res, step) })
	} else {
		res.Daemon = "private"
		err = withPrivateDaemon(ctx, f, mem, func(c *client.Client) error { return benchLoop(ctx, c, direct, "memory", f.rounds, res, step) })
	}
	p.Done(err)
	if err != nil {
		return nil, err
	}
	res.LoadAvg[1] = loadAvg()
	return res, nil
}

var (
	benchSeed = json.RawMessage(`{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]},{"name":"Grace","entityType":"person","observations":["found a moth"]}]}`)
	benchArgs = json.RawMessage(`{"query":"Ada"}`)
)

// directPeer is an mcp-go client in this process on a server-memory of
// its own: the upstream's share of the loop.
type directPeer struct {
	c   *mcpclient.Client
	dir string
}

// startDirect starts the direct peer, seeds it as the loop program seeds
// the daemon's upstream and warms the server's JIT, as the daemon's
// upstream is by then.
func startDirect(ctx context.Context, mem string) (*directPeer, error) {
	dir, err := os.MkdirTemp("", "cexec-bench-tools-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	d := &directPeer{dir: dir, c: mcpclient.NewClient(transport.NewStdio(mem, []string{"MEMORY_FILE_PATH=" + filepath.Join(dir, "direct.jsonl")}))}
	if err := d.c.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start direct server-memory: %w", err)
	}
	if _, err := d.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "cexecctl-bench"}}}); err != nil {
		d.close()
		return nil, fmt.Errorf("initialize direct server-memory: %w", err)
	}
	if err := d.call(ctx, "create_entities", benchSeed); err != nil {
		d.close()
		return nil, err
	}
	for range 100 {
		if err := d.call(ctx, "search_nodes", benchArgs); err != nil {
			d.close()
			return nil, err
		}
	}
	return d, nil
}

func (d *directPeer) call(ctx context.Context, name string, args json.RawMessage) error {
	_, err := d.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	return err
}

func (d *directPeer) close() {
	_ = d.c.Close()
	_ = os.RemoveAll(d.dir)
}

// sequential times the loop program's 1,000 calls one after the other.
func (d *directPeer) sequential(ctx context.Context) (float64, error) {
	t0 := time.Now()
	for range 1000 {
		if err := d.call(ctx, "search_nodes", benchArgs); err != nil {
			return 0, err
		}
	}
	return msf(time.Since(t0)), nil
}

// concurrent times them from threads goroutines.
func (d *directPeer) concurrent(ctx context.Context, threads int) (float64, error) {
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(threads)
	for range 1000 {
		g.Go(func() error { return d.call(gctx, "search_nodes", benchArgs) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return msf(time.Since(t0)), nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func printTools(env *cli.Env, r *ToolsResult) {
	w := env.Stdout
	fmt.Fprintf(w, "1,000 call_tool in one execution from %d threads: %.1f ms in the program, %.1f ms the whole execution (p50 of %d; %s daemon; target <= 1000 ms)\n",
		r.LoopThreads, r.Loop1000Ms, r.Loop1000ExecMs, r.Rounds, r.Daemon)
	fmt.Fprintf(w, "  CPU per loop: cexecd %.0f ms, sandbox plugin %.0f ms, upstream %.0f ms, program %.0f ms\n",
		r.Loop1000CPUMs.Cexecd, r.Loop1000CPUMs.Plugin, r.Loop1000CPUMs.Upstream, r.Loop1000CPUMs.Program)
	fmt.Fprintf(w, "  sequential call_tool overhead over a direct mcp-go call: %.3f ms per call (target <= 0.3 ms)\n", r.CallOverheadMs)
	fmt.Fprintf(w, "  one after the other: %.1f ms; an mcp-go client in this process: %.1f ms one after the other, %.1f ms from %d goroutines\n",
		r.Loop1000SequentialMs, r.Loop1000DirectMs, r.Loop1000DirectConcurrentMs, r.LoopThreads)
	fmt.Fprintf(w, "load average %.1f -> %.1f on %d CPUs\n", r.LoadAvg[0], r.LoadAvg[1], r.CPUs)
}
