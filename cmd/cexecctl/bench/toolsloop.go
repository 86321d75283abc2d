package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/internal/tailbuf"
)

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
// threaded loop; step is called after each execution.
func benchLoop(ctx context.Context, c *client.Client, direct *directPeer, server string, rounds int, res *ToolsResult, step func()) error {
	seq := &cexecv1.ExecRequest{Code: fmt.Sprintf(loopProgram, server, 1)}
	// The direct peer has made 1,100 calls by now (startDirect and the
	// concurrent loop); without as many first, the daemon's upstream would
	// be measured with its JIT still cold and the overhead overstated.
	if _, _, err := runLoop(ctx, c, seq); err != nil {
		return err
	}
	step()
	var seqs, directs, overheads []float64
	for range rounds {
		loop, _, err := runLoop(ctx, c, seq)
		if err != nil {
			return err
		}
		d, err := direct.sequential(ctx)
		if err != nil {
			return err
		}
		seqs, directs = append(seqs, loop), append(directs, d)
		overheads = append(overheads, (loop-d)/1000)
		step()
	}
	res.Loop1000SequentialMs, res.Loop1000DirectMs = median(seqs), median(directs)
	res.CallOverheadMs = math.Round(median(overheads)*1000) / 1000

	req := &cexecv1.ExecRequest{Code: fmt.Sprintf(loopProgram, server, res.LoopThreads)}
	if _, _, err := runLoop(ctx, c, req); err != nil {
		return err
	}
	step()
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
		step()
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
# Tool-call latency without PII detection on the path, on purpose.
pipeline {
  guards = []
}
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
	stderr := tailbuf.New(2000)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	d := watch(cmd)
	defer d.stop(15 * time.Second)
	c, err := waitReady(ctx, sock, d, f.timeout)
	if err != nil {
		return fmt.Errorf("%w\ncexecd stderr:\n%s", err, strings.TrimSpace(stderr.String()))
	}
	defer func() { _ = c.Close() }()
	if err := fn(c); err != nil {
		return fmt.Errorf("%w\ncexecd stderr:\n%s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
