package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/core/config"
)

// ToolsResult is the output of `cexecctl bench tools --json`.
type ToolsResult struct {
	// OverheadP50Ms is BridgeP50Ms - DirectP50Ms: what the daemon's side of
	// call_tool (lookup, argument validation against the input schema,
	// result decoding, recording) adds to an mcp-go client call to the
	// same kind of upstream, measured in this process.
	OverheadP50Ms float64 `json:"overhead_p50_ms"`
	DirectP50Ms   float64 `json:"direct_p50_ms"`
	BridgeP50Ms   float64 `json:"bridge_p50_ms"`
	OverheadCalls int     `json:"overhead_calls"`
	// BridgeOwnP50Ms is the bridge's own work per call (the same tool and
	// arguments, an upstream answering at once from memory): the part of
	// the overhead that does not drown in the upstream's jitter.
	BridgeOwnP50Ms float64 `json:"bridge_own_p50_ms"`
	// Loop1000Ms is the p50 over Rounds executions of the time one program
	// took for 1,000 call_tool calls, measured inside the program, through
	// the daemon (sandbox -> sandbox plugin -> cexecd -> upstream). The
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
	// Loop1000CPUMs is CPU time per loop of 1,000 calls from LoopThreads
	// threads, by process (from /proc; 10 ms ticks): unlike wall time it
	// does not grow when the machine is busy.
	Loop1000CPUMs LoopCPU `json:"loop_1000_cpu_ms"`
	Rounds        int     `json:"rounds"`
	// StubGenerationMs is the p50 of stubgen.Generate over StubTools tools
	// of StubServers servers (the LiveMCPBench catalogue).
	StubGenerationMs float64 `json:"stub_generation_ms"`
	StubTools        int     `json:"stub_tools"`
	StubServers      int     `json:"stub_servers"`
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
	memory     string
	dataset    string
	cexecd     string
	pluginDir  string
	server     string
	useDaemon  bool
	calls      int
	rounds     int
	threads    int
	stubRounds int
	timeout    time.Duration
}

func toolsBench(env *cli.Env) *cobra.Command {
	var f toolsFlags
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Measure call_tool overhead, 1,000 call_tools in one execution, and stub generation",
		Long: `Three figures of the tools path:

  overhead_p50_ms     in this process: a tool catalog and bridge over one
                      server-memory, against an mcp-go client on a second
                      server-memory holding the same graph; calls alternate,
                      the medians are subtracted. This is the daemon's own
                      work per call_tool (routing, schema validation, result
                      decoding, recording); the sandbox-to-daemon hop is in
                      loop_1000_ms.
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
  stub_generation_ms  stubgen.Generate for every tool of --dataset
                      (LiveMCPBench: 527 tools of 70 servers), p50.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.calls < 10 || f.rounds < 1 || f.stubRounds < 1 || f.threads < 1 {
				return cli.UsageErrorf("--calls must be at least 10, --rounds, --stub-rounds and --threads at least 1")
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
	fl.StringVar(&f.dataset, "dataset", "", "directory with the tools.jsonl to generate stubs for (default: ../shared/eval/livemcpbench beside the repository)")
	fl.StringVar(&f.cexecd, "cexecd", "", "cexecd binary for the private daemon (default: next to cexecctl, else from PATH)")
	fl.StringVar(&f.pluginDir, "plugin-dir", "", "plugin_dir of the private daemon (default: the directory of cexecd)")
	fl.BoolVar(&f.useDaemon, "daemon", false, "run the loop on the running daemon (--address) instead of a private one")
	fl.StringVar(&f.server, "server", "memory", "with --daemon: the server-memory's name in the daemon's cexec.hcl")
	fl.IntVar(&f.calls, "calls", 500, "calls of each kind for overhead_p50_ms")
	fl.IntVar(&f.rounds, "rounds", 3, "executions of the 1,000-call program")
	fl.IntVar(&f.threads, "threads", 8, "threads the 1,000-call program makes its calls from")
	fl.IntVar(&f.stubRounds, "stub-rounds", 5, "generations of the stub tree")
	fl.DurationVar(&f.timeout, "timeout", 60*time.Second, "give up on the private daemon's start after this long")
	return cmd
}

func benchTools(ctx context.Context, env *cli.Env, f toolsFlags) (*ToolsResult, error) {
	progress := func(format string, args ...any) {
		if !env.JSON {
			fmt.Fprintf(env.Stderr, format+"\n", args...)
		}
	}
	res := &ToolsResult{Rounds: f.rounds, LoopThreads: f.threads, CPUs: runtime.NumCPU(), OverheadCalls: f.calls}
	res.LoadAvg[0] = loadAvg()
	mem, err := findPeer(f.memory, "mcp-server-memory")
	if err != nil {
		return nil, err
	}

	progress("stub generation: %d rounds", f.stubRounds)
	dir, err := findDataset(f.dataset)
	if err != nil {
		return nil, err
	}
	servers, err := loadStubTools(filepath.Join(dir, "tools.jsonl"))
	if err != nil {
		return nil, err
	}
	res.StubServers = len(servers)
	for _, s := range servers {
		res.StubTools += len(s.Tools)
	}
	gens := make([]float64, f.stubRounds)
	for i := range gens {
		t0 := time.Now()
		stubgen.Generate(servers)
		gens[i] = ms(time.Since(t0))
	}
	res.StubGenerationMs = median(gens)

	progress("call_tool overhead: %d calls each, bridge and direct, alternating", f.calls)
	if err := benchOverhead(ctx, mem, f.calls, res); err != nil {
		return nil, err
	}

	progress("1,000 call_tool in one execution: %d rounds", f.rounds)
	if f.useDaemon {
		res.Daemon = client.SocketPath(env.Address)
		if res.Daemon == "" {
			res.Daemon = client.DefaultAddress()
		}
		err = env.Do(ctx, func(c *client.Client) error { return benchLoop(ctx, c, f.server, f.rounds, res) })
	} else {
		res.Daemon = "private"
		err = withPrivateDaemon(ctx, f, mem, func(c *client.Client) error { return benchLoop(ctx, c, "memory", f.rounds, res) })
	}
	if err != nil {
		return nil, err
	}
	res.LoadAvg[1] = loadAvg()
	return res, nil
}

// findPeer returns flag, else the binary of the repository's pinned npm
// test peers (test/peers/node_modules/.bin) found from the working directory
// or from this executable upwards, else name from PATH.
func findPeer(flag, name string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	rel := filepath.Join("test", "peers", "node_modules", ".bin", name)
	if p, ok := upwards(rel); ok {
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("find %s (pass --memory-server, or run `make deps` in the repository): %w", name, err)
	}
	return p, nil
}

// upwards looks for rel under the working directory, the executable's
// directory and each of their parents.
func upwards(rel string) (string, bool) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if self, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(self))
	}
	for _, dir := range starts {
		for {
			p := filepath.Join(dir, rel)
			if _, err := os.Stat(p); err == nil {
				return p, true
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", false
}

// findDataset returns flag, else ../shared/eval/livemcpbench beside the
// repository (found upwards from the working directory).
func findDataset(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p, ok := upwards(filepath.Join("shared", "eval", "livemcpbench", "tools.jsonl")); ok {
		return filepath.Dir(p), nil
	}
	return "", errors.New("find the LiveMCPBench tools (../shared/eval/livemcpbench): pass --dataset")
}

// loadStubTools reads tools.jsonl (server, name, description, inputSchema,
// and outputSchema/annotations when present) grouped by server in order of
// first appearance.
func loadStubTools(path string) ([]stubgen.Server, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	defer func() { _ = fh.Close() }()
	var out []stubgen.Server
	index := map[string]int{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var t struct {
			Server       string             `json:"server"`
			Name         string             `json:"name"`
			Title        string             `json:"title"`
			Description  string             `json:"description"`
			InputSchema  json.RawMessage    `json:"inputSchema"`
			OutputSchema json.RawMessage    `json:"outputSchema"`
			Annotations  mcp.ToolAnnotation `json:"annotations"`
		}
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		i, ok := index[t.Server]
		if !ok {
			i = len(out)
			index[t.Server] = i
			out = append(out, stubgen.Server{Name: t.Server})
		}
		out[i].Tools = append(out[i].Tools, stubgen.Tool{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: stubgen.Annotations(t.Annotations),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no tools", path)
	}
	return out, nil
}

var (
	benchSeed = json.RawMessage(`{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]},{"name":"Grace","entityType":"person","observations":["found a moth"]}]}`)
	benchArgs = json.RawMessage(`{"query":"Ada"}`)
)

// benchOverhead times bridge.CallTool through a catalog over one
// server-memory against a plain mcp-go client on another, alternating the
// two so that both see the same machine load, then 1,000 direct calls in a
// row.
func benchOverhead(ctx context.Context, mem string, calls int, res *ToolsResult) error {
	dir, err := os.MkdirTemp("", "cexec-bench-tools-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cfg := &config.Config{Daemon: config.Daemon{DataDir: dir}, MCPServers: []*config.MCPServer{{
		Name: "memory", Transport: config.TransportStdio, Command: mem,
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "bridge.jsonl")}, Timeout: 30 * time.Second,
	}}}
	cat, err := catalog.New(cfg, catalog.Options{Logger: hclog.NewNullLogger(), ServersDir: "-", LocalServersDir: "-"})
	if err != nil {
		return err
	}
	defer func() { _ = cat.Close() }()
	if err := cat.Start(ctx); err != nil {
		return fmt.Errorf("start server-memory: %w", err)
	}
	br := bridge.New(cat, nil)

	direct := mcpclient.NewClient(transport.NewStdio(mem, []string{"MEMORY_FILE_PATH=" + filepath.Join(dir, "direct.jsonl")}))
	if err := direct.Start(ctx); err != nil {
		return fmt.Errorf("start direct server-memory: %w", err)
	}
	defer func() { _ = direct.Close() }()
	if _, err := direct.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "cexecctl-bench"}}}); err != nil {
		return fmt.Errorf("initialize direct server-memory: %w", err)
	}
	call := func(name string, args json.RawMessage) error {
		_, err := direct.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
		return err
	}
	if err := call("create_entities", benchSeed); err != nil {
		return err
	}
	if _, err := br.CallTool(ctx, "memory", "create_entities", benchSeed); err != nil {
		return err
	}
	// Warm both paths: schema compilation, the servers' JIT.
	for range 50 {
		if err := call("search_nodes", benchArgs); err != nil {
			return err
		}
		if _, err := br.CallTool(ctx, "memory", "search_nodes", benchArgs); err != nil {
			return err
		}
	}
	directT, bridgeT := make([]float64, 0, calls), make([]float64, 0, calls)
	for range calls {
		t0 := time.Now()
		if err := call("search_nodes", benchArgs); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := br.CallTool(ctx, "memory", "search_nodes", benchArgs); err != nil {
			return err
		}
		directT = append(directT, msf(t1.Sub(t0)))
		bridgeT = append(bridgeT, msf(time.Since(t1)))
	}
	res.DirectP50Ms, res.BridgeP50Ms = median(directT), median(bridgeT)
	res.OverheadP50Ms = res.BridgeP50Ms - res.DirectP50Ms

	// The bridge alone, over the real tool (schema included) and the
	// result the server gave.
	tool, ok := cat.Tool("memory", "search_nodes")
	if !ok {
		return errors.New("server-memory has no search_nodes tool")
	}
	answer, err := cat.Call(ctx, "memory", "search_nodes", benchArgs)
	if err != nil {
		return err
	}
	own := bridge.New(fixedCatalog{tool: tool, res: answer}, nil)
	ownT := make([]float64, 0, 10*calls)
	for range 10 * calls {
		t0 := time.Now()
		if _, err := own.CallTool(ctx, "memory", "search_nodes", benchArgs); err != nil {
			return err
		}
		ownT = append(ownT, msf(time.Since(t0)))
	}
	res.BridgeOwnP50Ms = median(ownT)

	t0 := time.Now()
	for range 1000 {
		if err := call("search_nodes", benchArgs); err != nil {
			return err
		}
	}
	res.Loop1000DirectMs = msf(time.Since(t0))

	t0 = time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(res.LoopThreads)
	for range 1000 {
		g.Go(func() error {
			_, err := direct.CallTool(gctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search_nodes", Arguments: benchArgs}})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	res.Loop1000DirectConcurrentMs = msf(time.Since(t0))
	return nil
}

// fixedCatalog is one tool whose calls answer at once with a fixed result.
type fixedCatalog struct {
	tool catalog.Tool
	res  *mcp.CallToolResult
}

func (f fixedCatalog) Tool(server, name string) (catalog.Tool, bool) {
	return f.tool, server == f.tool.Server && name == f.tool.Name
}
func (f fixedCatalog) Tools() []catalog.Tool { return []catalog.Tool{f.tool} }
func (f fixedCatalog) Server(string) (catalog.ServerStatus, bool) {
	return catalog.ServerStatus{State: catalog.StateReady}, true
}
func (f fixedCatalog) Call(context.Context, string, string, json.RawMessage) (*mcp.CallToolResult, error) {
	return f.res, nil
}

// loopProgram makes 1,000 call_tool calls, from a pool of threads or one
// after the other, checks every answer and prints how long they took.
const loopProgram = `
import time
from concurrent.futures import ThreadPoolExecutor
from cexec import call_tool
server, threads = %q, %d
def search(_):
    found = call_tool(server, "search_nodes", {"query": "Ada"})
    if "wrote the first program" not in str(found):
        raise AssertionError(f"search_nodes answered {found!r}")
call_tool(server, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]})
search(0)
t0 = time.perf_counter()
if threads == 1:
    for i in range(1000):
        search(i)
else:
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(search, range(1000)):
            pass
print(round((time.perf_counter() - t0) * 1000, 3))
`

// benchLoop runs the 1,000-call program rounds times with the calls in a
// plain loop, then (after one unmeasured run) rounds times from
// res.LoopThreads threads, and records the medians and the CPU per
// threaded loop.
func benchLoop(ctx context.Context, c *client.Client, server string, rounds int, res *ToolsResult) error {
	seq := &cexecv1.ExecRequest{Code: fmt.Sprintf(loopProgram, server, 1)}
	var seqs []float64
	for range rounds {
		loop, _, err := runLoop(ctx, c, seq)
		if err != nil {
			return err
		}
		seqs = append(seqs, loop)
	}
	res.Loop1000SequentialMs = median(seqs)

	req := &cexecv1.ExecRequest{Code: fmt.Sprintf(loopProgram, server, res.LoopThreads)}
	if _, _, err := runLoop(ctx, c, req); err != nil {
		return err
	}
	pids, err := loopPIDs(ctx, c, server)
	if err != nil {
		return err
	}
	before := cpuOf(pids)
	var loops, execs []float64
	var program float64
	for range rounds {
		loop, r, err := runLoop(ctx, c, req)
		if err != nil {
			return err
		}
		loops = append(loops, loop)
		execs = append(execs, float64(r.GetDurationUs())/1000)
		program += float64(r.GetCpuMs())
	}
	after := cpuOf(pids)
	n := float64(rounds)
	res.Loop1000Ms, res.Loop1000ExecMs = median(loops), median(execs)
	res.Loop1000CPUMs = LoopCPU{
		Cexecd: (after[0] - before[0]) / n, Plugin: (after[1] - before[1]) / n,
		Upstream: (after[2] - before[2]) / n, Program: program / n,
	}
	return nil
}

// loopPIDs are cexecd, the sandbox plugin and the upstream server.
func loopPIDs(ctx context.Context, c *client.Client, server string) ([3]int, error) {
	pids, err := processes(ctx, c)
	if err != nil {
		return pids, err
	}
	ss, err := c.ListServers(ctx)
	if err != nil {
		return pids, err
	}
	for _, s := range ss {
		if s.GetName() == server {
			pids[2] = int(s.GetPid())
		}
	}
	return pids, nil
}

// runLoop runs the program once and checks that every call succeeded.
func runLoop(ctx context.Context, c *client.Client, req *cexecv1.ExecRequest) (float64, *cexecv1.ExecResult, error) {
	var stdout, stderr strings.Builder
	var res *cexecv1.ExecResult
	for ev, err := range c.Exec(ctx, req) {
		if err != nil {
			return 0, nil, err
		}
		if o := ev.GetOutput(); o != nil {
			if o.GetStream() == "stderr" {
				stderr.Write(o.GetData())
			} else {
				stdout.Write(o.GetData())
			}
		}
		if r := ev.GetResult(); r != nil {
			res = r
		}
	}
	if res == nil {
		return 0, nil, errors.New("loop program: no result")
	}
	if res.GetExitCode() != 0 || res.GetError() != nil {
		return 0, nil, fmt.Errorf("loop program failed (exit %d): %s %s\n%s", res.GetExitCode(), res.GetError().GetType(), res.GetError().GetMessage(), stderr.String())
	}
	calls, failed := len(res.GetToolCalls()), 0
	for _, tc := range res.GetToolCalls() {
		if !tc.GetOk() {
			failed++
		}
	}
	if calls != 1002 || failed != 0 {
		return 0, nil, fmt.Errorf("loop program made %d tool calls, %d failed; want 1002 that succeed", calls, failed)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(stdout.String()), 64)
	if err != nil {
		return 0, nil, fmt.Errorf("loop program printed %q", stdout.String())
	}
	return v, res, nil
}

// withPrivateDaemon starts cexecd on a temporary socket and data directory
// with the bwrap sandbox and server-memory, runs fn against it and stops it.
func withPrivateDaemon(ctx context.Context, f toolsFlags, mem string, fn func(*client.Client) error) error {
	bin, err := findCexecd(f.cexecd)
	if err != nil {
		return err
	}
	pluginDir := f.pluginDir
	if pluginDir == "" {
		pluginDir = filepath.Dir(bin)
	}
	if pluginDir, err = filepath.Abs(pluginDir); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "cexec-bench-tools-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	sock := filepath.Join(dir, "cexecd.sock")
	cfgPath := filepath.Join(dir, "cexec.hcl")
	hcl := fmt.Sprintf(`cexec {
  data_dir    = %q
  plugin_dir  = %q
  servers_dir = %q
  skills_dir  = %q
  log_level   = "warn"
}
plugin "sandbox" "bwrap" {}
sandbox {
  backend = "bwrap"
  pool {
    warm = 1
  }
}
mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = %q }
}
`, filepath.Join(dir, "data"), pluginDir, filepath.Join(dir, "servers"), filepath.Join(dir, "skills"), mem, filepath.Join(dir, "memory.jsonl"))
	if err := os.WriteFile(cfgPath, []byte(hcl), 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "-config", cfgPath, "-socket", sock)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	c, err := waitReady(ctx, sock, exited, f.timeout)
	if err != nil {
		return fmt.Errorf("%w\ncexecd stderr:\n%s", err, stderr.tail())
	}
	defer func() { _ = c.Close() }()
	if err := fn(c); err != nil {
		return fmt.Errorf("%w\ncexecd stderr:\n%s", err, stderr.tail())
	}
	return nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func printTools(env *cli.Env, r *ToolsResult) {
	w := env.Stdout
	fmt.Fprintf(w, "call_tool overhead p50 %.3f ms (bridge %.3f ms - direct mcp-go %.3f ms, %d calls each; target <= 0.5 ms); the bridge's own work %.3f ms\n",
		r.OverheadP50Ms, r.BridgeP50Ms, r.DirectP50Ms, r.OverheadCalls, r.BridgeOwnP50Ms)
	fmt.Fprintf(w, "1,000 call_tool in one execution from %d threads: %.1f ms in the program, %.1f ms the whole execution (p50 of %d; %s daemon; target <= 1000 ms)\n",
		r.LoopThreads, r.Loop1000Ms, r.Loop1000ExecMs, r.Rounds, r.Daemon)
	fmt.Fprintf(w, "  CPU per loop: cexecd %.0f ms, sandbox plugin %.0f ms, upstream %.0f ms, program %.0f ms\n",
		r.Loop1000CPUMs.Cexecd, r.Loop1000CPUMs.Plugin, r.Loop1000CPUMs.Upstream, r.Loop1000CPUMs.Program)
	fmt.Fprintf(w, "  one after the other: %.1f ms; an mcp-go client in this process: %.1f ms one after the other, %.1f ms from %d goroutines\n",
		r.Loop1000SequentialMs, r.Loop1000DirectMs, r.Loop1000DirectConcurrentMs, r.LoopThreads)
	fmt.Fprintf(w, "stub generation: %.1f ms for %d tools of %d servers (p50; target <= 1000 ms)\n", r.StubGenerationMs, r.StubTools, r.StubServers)
	fmt.Fprintf(w, "load average %.1f -> %.1f on %d CPUs\n", r.LoadAvg[0], r.LoadAvg[1], r.CPUs)
}
