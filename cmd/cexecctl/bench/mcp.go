package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/client/mcpclient"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/maxprocs"
)

// MCPResult is the output of `cexecctl bench mcp --json`: execute_code
// latency over streamable HTTP as an agent sees it (or another server's
// code tool over stdio), in milliseconds.
type MCPResult struct {
	// Endpoint is the MCP socket (or URL, or stdio command) measured.
	Endpoint string `json:"endpoint"`
	Tool     string `json:"tool"`
	Code     string `json:"code"`
	// Persistent: each call ran in its session's persistent interpreter.
	Persistent bool `json:"persistent,omitempty"`
	// PaceS is the pause before each measured call (--pace), 0 for back
	// to back.
	PaceS  float64 `json:"pace_s,omitempty"`
	Tenant string  `json:"tenant,omitempty"`
	N      int     `json:"n"`
	Warmup int     `json:"warmup"`
	MinMs  float64 `json:"min_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
	// Clients is how many sessions called at once; PerSecond the measured
	// executions per second, all together.
	Clients   int     `json:"clients"`
	PerSecond float64 `json:"executions_per_second"`
	// CPUPerCallMs is CPU time per measured call, which unlike latency
	// does not depend on how busy the machine is; measured on the MCP
	// socket of a local daemon or a stdio server only.
	CPUPerCallMs *MCPCPU `json:"cpu_per_call_ms,omitempty"`
	// LoadAvg is /proc/loadavg's 1-minute figure before and after.
	LoadAvg [2]float64 `json:"load_avg_1m"`
	CPUs    int        `json:"cpus"`
}

// MCPCPU splits the CPU time of one call by process, from /proc (10 ms
// ticks, averaged over the measured calls).
type MCPCPU struct {
	Cexecd float64 `json:"cexecd,omitempty"`
	// Plugin is the sandbox plugin process, without its sandboxes.
	Plugin float64 `json:"sandbox_plugin,omitempty"`
	// Server is a stdio server's processes (with --), all sessions'.
	Server float64 `json:"server,omitempty"`
	Client float64 `json:"client"`
	// All is what the whole machine spent per call while the calls ran
	// (see machineBusyMs): cexecd, the sandbox and its program, the
	// guard plugins that look at every result, the client and the kernel.
	All float64 `json:"all"`
}

type mcpFlags struct {
	url, token, tenant, code string
	tool, codeArg, want      string
	n, warmup, clients       int
	timeout, pace            time.Duration
	persistent               bool
}

func mcpBench(env *cli.Env) *cobra.Command {
	var f mcpFlags
	cmd := &cobra.Command{
		Use:   "mcp [-- command [args...]]",
		Short: "Time execute_code over the running daemon's MCP face (streamable HTTP), or a stdio MCP server's code tool, with CPU per call",
		Long: "Opens one MCP session on the daemon's MCP socket (next to its control socket, see\n" +
			"--address) or on --url, runs --warmup unmeasured execute_code calls, then --n measured\n" +
			"ones, checking each result. The default program is print(1+1); the target is p50 <= 5 ms.\n\n" +
			"With a command after --, each session starts that MCP server over stdio instead and calls\n" +
			"its --tool the same way: another runtime measured by the same client, for ratios\n" +
			"(scripts/bench-peers.sh measures in-process peers so).",
		Example: "  cexecctl bench mcp --n 500\n" +
			"  cexecctl bench mcp --tool pyodide -- node test/bench-peers/server.mjs\n" +
			"  cexecctl bench mcp --tool node_vm --code 'console.log(1+1)' --want 2 -- node test/bench-peers/server.mjs",
		RunE: func(cmd *cobra.Command, args []string) error {
			maxprocs.Set() // on an execution's path, as cexecd is
			if f.n < 1 || f.warmup < 1 || f.clients < 1 {
				return cli.UsageErrorf("--n, --warmup and --clients must be at least 1")
			}
			if f.pace < 0 {
				return cli.UsageErrorf("--pace must not be negative, got %s", f.pace)
			}
			if cmd.ArgsLenAtDash() != 0 && len(args) > 0 {
				return cli.UsageErrorf("unexpected argument %q: a server to start goes after --", args[0])
			}
			if len(args) > 0 && f.url != "" {
				return cli.UsageErrorf("--url and a command after -- both name the server; give one")
			}
			if f.persistent && f.tool != "execute_code" {
				return cli.UsageErrorf("--persistent is execute_code's argument; --tool %s does not take it", f.tool)
			}
			if !cmd.Flags().Changed("timeout") {
				f.timeout += time.Duration(f.n) * f.pace
			}
			if f.token == "" {
				f.token = os.Getenv(endpoint.TokenEnv)
			}
			if (f.url != "" || len(args) > 0) && !cli.TenantChosen(cmd) {
				f.tenant = "" // the token's tenant, or a server with none
			}
			return runMCP(cmd.Context(), env, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "streamable HTTP endpoint instead of the MCP socket, e.g. http://127.0.0.1:7797/mcp")
	fl.StringVar(&f.token, "token", "", "bearer token for --url (default $"+endpoint.TokenEnv+")")
	cli.TenantFlag(fl, &f.tenant)
	fl.StringVar(&f.code, "code", "", "program to run (default print(1+1), whose output is checked)")
	fl.StringVar(&f.tool, "tool", "execute_code", "tool to call")
	fl.StringVar(&f.codeArg, "code-arg", "code", "the tool's argument the program goes in")
	fl.StringVar(&f.want, "want", "", "text every result must start with (default 2 and a newline for the default program)")
	fl.IntVar(&f.n, "n", 200, "measured calls per client")
	fl.IntVar(&f.clients, "clients", 1, "MCP sessions calling at once (behind a load balancer they spread over replicas; with a command, one server each)")
	fl.IntVar(&f.warmup, "warmup", 10, "unmeasured calls first")
	fl.BoolVar(&f.persistent, "persistent", false, "run every call in its session's persistent interpreter (execute_code's persistent): the figure for agents that keep state between programs")
	fl.DurationVar(&f.pace, "pace", 0, "pause before each measured call, as an agent's turns come (default back to back; CPU per call then includes what the machine did during the pauses)")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long (default 5m plus --n times --pace)")
	return cmd
}

// runMCP runs the benchmark against the daemon's MCP socket, f.url or a
// stdio server started from command, and prints the result.
func runMCP(ctx context.Context, env *cli.Env, f mcpFlags, command []string) error {
	o := mcpclient.BenchOptions{URL: f.url, Token: f.token, Tenant: f.tenant, Code: f.code, Want: f.want, N: f.n, Warmup: f.warmup, Clients: f.clients,
		Persistent: f.persistent, Pace: f.pace, Command: command, Tool: f.tool, CodeArg: f.codeArg}
	target := f.url
	switch {
	case len(command) > 0:
		target = strings.Join(command, " ")
	case f.url == "":
		addr := env.Address
		if addr == "" {
			addr = client.DefaultAddress()
		}
		target = endpoint.MCPSocket(client.SocketPath(addr))
		if _, err := os.Stat(target); errors.Is(err, fs.ErrNotExist) {
			return &cli.ExitError{Code: cli.ExitNotRunning, Err: fmt.Errorf("no MCP socket at %s: is cexecd running there (see --address)?", target)}
		}
		o.URL = endpoint.UnixBaseURL + endpoint.MCPPath
		o.HTTPClient = endpoint.UnixClient(target)
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	// The daemon's and its sandbox plugin's pids, for CPU per call, when it
	// is a local daemon; a stdio server's as each session starts one.
	var pids [3]int
	if len(command) > 0 {
		pids[2] = os.Getpid()
	}
	if f.url == "" && len(command) == 0 {
		if c, err := env.Client(ctx); err == nil {
			pids, _ = processes(ctx, c)
			_ = c.Close()
		}
	}
	var (
		mu      sync.Mutex
		servers []int
	)
	o.OnServer = func(pid int) {
		mu.Lock()
		servers = append(servers, pid)
		mu.Unlock()
	}
	serverCPU := func() float64 {
		mu.Lock()
		defer mu.Unlock()
		var sum float64
		for _, pid := range servers {
			ms, _ := cpuMs(pid)
			sum += ms
		}
		return sum
	}
	p := env.Progress("bench mcp: "+f.tool+" calls", int64((f.n+f.warmup)*f.clients))
	o.OnCall = func() { p.Add(1) }
	var (
		load0, load1, busy0, busy1, srv0, srv1 float64
		cpu0, cpu1                             [3]float64
		err0, err1                             error
	)
	o.OnMeasureStart = func() {
		load0, cpu0, srv0 = loadAvg(), cpuOf(pids), serverCPU()
		busy0, err0 = machineBusyMs()
	}
	o.OnMeasureEnd = func() {
		busy1, err1 = machineBusyMs()
		cpu1, srv1, load1 = cpuOf(pids), serverCPU(), loadAvg()
	}
	r, err := mcpclient.BenchExecute(ctx, o)
	p.Done(err)
	if err != nil {
		return err
	}
	code := f.code
	if code == "" {
		code = "print(1+1)"
	}
	res := MCPResult{Endpoint: target, Tool: f.tool, Code: code, Persistent: f.persistent, PaceS: f.pace.Seconds(), Tenant: f.tenant, N: r.N, Warmup: f.warmup,
		MinMs: ms(r.Min), P50Ms: ms(r.P50), P90Ms: ms(r.P90), P99Ms: ms(r.P99), MaxMs: ms(r.Max), MeanMs: ms(r.Mean),
		Clients: f.clients, PerSecond: math.Round(r.PerSecond*10) / 10,
		LoadAvg: [2]float64{load0, load1}, CPUs: runtime.NumCPU()}
	calls := float64(r.N)
	per := func(d float64) float64 { return math.Round(d/calls*1000) / 1000 }
	if pids[0] > 0 || len(command) > 0 {
		res.CPUPerCallMs = &MCPCPU{Cexecd: per(cpu1[0] - cpu0[0]), Plugin: per(cpu1[1] - cpu0[1]), Server: per(srv1 - srv0), Client: per(cpu1[2] - cpu0[2])}
		if err0 == nil && err1 == nil {
			res.CPUPerCallMs.All = per(busy1 - busy0)
		}
	}
	if env.JSON {
		return env.PrintJSON(res)
	}
	mode := ""
	if f.persistent {
		mode = ", persistent"
	}
	if f.pace > 0 {
		mode += fmt.Sprintf(", %s apart", f.pace)
	}
	fmt.Fprintf(env.Stdout, "%s %q%s over MCP (%s), %d calls: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, min %.2f ms, max %.2f ms\n",
		f.tool, code, mode, target, res.N, res.P50Ms, res.P90Ms, res.P99Ms, res.MinMs, res.MaxMs)
	fmt.Fprintf(env.Stdout, "%d client(s) at once: %.1f executions/s\n", res.Clients, res.PerSecond)
	if c := res.CPUPerCallMs; c != nil {
		if len(command) > 0 {
			fmt.Fprintf(env.Stdout, "CPU per call: %.2f ms on the whole machine; server %.2f ms, client %.2f ms\n", c.All, c.Server, c.Client)
		} else {
			fmt.Fprintf(env.Stdout, "CPU per call: %.2f ms on the whole machine; cexecd %.2f ms, sandbox plugin %.2f ms, client %.2f ms\n",
				c.All, c.Cexecd, c.Plugin, c.Client)
		}
	}
	fmt.Fprintf(env.Stdout, "%d CPUs, load %.1f -> %.1f\n", res.CPUs, load0, load1)
	return nil
}
