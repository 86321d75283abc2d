package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
)

// k8sCluster is the cluster of the opt-in TestCluster tests (`make
// test-cluster`), with the k8s plugin built.
type k8sCluster struct{ testutil.K8sCluster }

func k8sClusterOrSkip(t *testing.T) k8sCluster {
	t.Helper()
	c := k8sCluster{testutil.K8sClusterOrSkip(t)}
	if _, err := os.Stat(filepath.Join(bins.pluginDir, "cexec-plugin-sandbox-k8s")); err != nil {
		if err := testutil.GoBuild(filepath.Join(bins.pluginDir, "cexec-plugin-sandbox-k8s"), "./plugins/sandbox-k8s"); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// pluginBlock is the block of a built plugin of the default cexec.hcl.
func pluginBlock(t *testing.T, prefix string) string {
	t.Helper()
	i := slices.IndexFunc(bins.plugins, func(b string) bool { return strings.HasPrefix(b, prefix) })
	if i < 0 {
		testutil.SkipMissing(t, "%s is not built", prefix)
	}
	return bins.plugins[i]
}

// backendSetup is a daemon config with the given sandbox plugin block and
// backend, one warm sandbox per tenant, and the reference filesystem and
// memory MCP servers of test/peers.
func backendSetup(t *testing.T, name, backend, sandboxBlock string) (setup, string) {
	t.Helper()
	for _, p := range []string{"mcp-server-filesystem", "mcp-server-memory"} {
		testpeers.Bin(t, p)
	}
	peers := testpeers.Dir()
	dir, err := os.MkdirTemp("", "cexec-e2e-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := setup{dir: dir, sock: filepath.Join(dir, "run", "cexecd.sock"), config: filepath.Join(dir, "cexec.hcl")}
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "apple.txt"), []byte("fruit: apple\ncolor: red\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`cexec {
  data_dir    = %q
  socket      = %q
  plugin_dir  = %q
  servers_dir = %q
  log_level   = "debug"
}

%s

%s

pipeline {
  selector = "embeddings"
  guards   = []
}

sandbox {
  backend = %q
  pool {
    warm = 1
  }
}

mcp_server "filesystem" {
  command = %q
  args    = [%q]
}

mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = %q }
}
`, filepath.Join(dir, "data"), s.sock, bins.pluginDir, filepath.Join(dir, "servers"), sandboxBlock, pluginBlock(t, `plugin "selector" "embeddings"`),
		backend, filepath.Join(peers, "mcp-server-filesystem"), files, filepath.Join(peers, "mcp-server-memory"), filepath.Join(dir, "memory.jsonl"))
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return s, files
}

// k8sBlock is the sandbox-k8s plugin block for c, with owner.
func (c k8sCluster) k8sBlock(owner string) string {
	return fmt.Sprintf(`plugin "sandbox" "k8s" {
  kubeconfig    = %q
  image         = %q
  namespace     = %q
  owner         = %q
  warm_pool     = 1
  ready_timeout = "3m"
}`, c.Kubeconfig, c.Image, c.Namespace, owner)
}

// execLong runs `cexecctl exec --json` with room for a first sandbox that
// a cluster starts (a pod from the warm pool, the runtime copied in).
func execLong(t *testing.T, s setup, code string) sbxResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := sbxCmd(ctx, s, "exec", "--json", "--timeout", "60s", "-c", code)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	var r sbxResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("exec --json: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	return r
}

// TestClusterExecToolCalls runs cexecd with its sandboxes in pods (plugin
// "sandbox" "k8s"): programs that call the reference filesystem and
// memory servers, whose stubs are copied into the pod, the runtime's
// environment, and a timeout after which the next execution runs.
func TestClusterExecToolCalls(t *testing.T) {
	c := k8sClusterOrSkip(t)
	owner := fmt.Sprintf("e2e-%d", os.Getpid())
	s, files := backendSetup(t, "k8s", "k8s", c.k8sBlock(owner))
	d := startDaemon(t, s)
	waitServers(t, s, "filesystem", "memory")

	r := execLong(t, s, `print(1+1)`)
	if r.ExitCode != 0 || r.Stdout != "2\n" {
		t.Fatalf("print(1+1) in a pod: %+v", r)
	}
	r = execLong(t, s, fmt.Sprintf(`import json
from servers.filesystem import read_text_file
from servers.memory import create_entities, open_nodes
text = read_text_file(path=%q)["content"]
fields = dict(line.split(": ", 1) for line in text.splitlines())
create_entities(entities=[{"name": fields["fruit"], "entityType": "fruit", "observations": ["color " + fields["color"]]}])
back = open_nodes(names=[fields["fruit"]])
print(json.dumps([(e["name"], e["observations"]) for e in back["entities"]]))
`, filepath.Join(files, "apple.txt")))
	if r.ExitCode != 0 || r.Error != nil || strings.TrimSpace(r.Stdout) != `[["apple", ["color red"]]]` {
		t.Fatalf("tool calls from a pod: %+v", r)
	}
	if len(r.ToolCalls) != 3 || !r.ToolCalls[0].OK || r.ToolCalls[0].Server != "filesystem" || r.ToolCalls[2].Tool != "open_nodes" {
		t.Errorf("tool calls %+v, want read_text_file, create_entities, open_nodes", r.ToolCalls)
	}
	// The program runs in the pod (pid 1 is the container's idle reaper),
	// with the runtime's environment, not the container's.
	r = execLong(t, s, `import os
print(sorted(k for k in os.environ if k.startswith("KUBERNETES")), "reap" in open("/proc/1/cmdline").read())`)
	if r.ExitCode != 0 || r.Stdout != "[] True\n" {
		t.Errorf("environment of a pod's program: %+v", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := sbxCmd(ctx, s, "exec", "--json", "--timeout", "2s", "-c", "import time\nprint('started', flush=True)\ntime.sleep(60)")
	out, _ := cmd.Output()
	var to sbxResult
	if err := json.Unmarshal(out, &to); err != nil || !to.TimedOut || !strings.Contains(to.Stdout, "started") {
		t.Errorf("a program past its timeout: %v %s", err, out)
	}
	if r := execLong(t, s, `print("after the timeout")`); r.ExitCode != 0 || r.Stdout != "after the timeout\n" {
		t.Errorf("an execution after a timeout: %+v", r)
	}
	daemonServes(t, s, d)
	// The local tools scanner's sandbox (servers folder read-only at
	// /src/servers) ran in a pod too.
	if strings.Contains(d.stderr.String(), "local tools skipped") {
		t.Errorf("the local tools scan failed:\n%s", d.stderr)
	}
}

// benchCtl runs a cexecctl bench command with --json against s and decodes
// its output into v.
func benchCtl(t *testing.T, s setup, v any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd := sbxCmd(ctx, s, append([]string{"bench"}, append(args, "--json")...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench %v: %v\n%s\n%s", args, err, out, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, out)
	}
}

// TestClusterBenchBesideBwrap measures, in one run, a pod sandbox and a
// bwrap sandbox through two daemons configured alike: warm execution
// latency of print(1+1) (cexecctl bench exec) and the call_tool round trip
// to server-memory (cexecctl bench tools --daemon), the two backends'
// rounds interleaved so that both see the same load. It prints the
// figures and asserts only that every execution succeeded.
func TestClusterBenchBesideBwrap(t *testing.T) {
	c := k8sClusterOrSkip(t)
	rounds := 5
	type backend struct {
		name string
		s    setup
		p50  []float64
		p99  []float64
		call []float64
		seq  []float64
	}
	k8sSetup, _ := backendSetup(t, "k8s", "k8s", c.k8sBlock(fmt.Sprintf("bench-%d", os.Getpid())))
	bwrapSetup, _ := backendSetup(t, "bwrap", "bwrap", pluginBlock(t, `plugin "sandbox" "bwrap"`))
	backends := []*backend{{name: "k8s", s: k8sSetup}, {name: "bwrap", s: bwrapSetup}}
	for _, b := range backends {
		startDaemon(t, b.s)
		waitServers(t, b.s, "memory")
		if r := execLong(t, b.s, `print(1+1)`); r.ExitCode != 0 || r.Stdout != "2\n" {
			t.Fatalf("%s: print(1+1): %+v", b.name, r)
		}
	}
	for range rounds {
		for _, b := range backends {
			var ex struct {
				Warm struct {
					N   int     `json:"n"`
					P50 float64 `json:"p50_ms"`
					P99 float64 `json:"p99_ms"`
				} `json:"warm"`
				Failures int `json:"failures"`
			}
			benchCtl(t, b.s, &ex, "exec", "--n", "200", "--cold", "0", "--concurrency", "1")
			var tl struct {
				Overhead float64 `json:"call_overhead_ms"`
				Seq      float64 `json:"loop_1000_sequential_ms"`
			}
			benchCtl(t, b.s, &tl, "tools", "--daemon", "--server", "memory", "--rounds", "1")
			if ex.Failures != 0 || ex.Warm.N != 200 || tl.Seq <= 0 {
				t.Fatalf("%s: bench exec failures %d, n %d; bench tools sequential loop %.1f ms", b.name, ex.Failures, ex.Warm.N, tl.Seq)
			}
			b.p50, b.p99 = append(b.p50, ex.Warm.P50), append(b.p99, ex.Warm.P99)
			b.call, b.seq = append(b.call, tl.Overhead), append(b.seq, tl.Seq/1000)
		}
	}
	median := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d interleaved rounds, median of the rounds' figures, load avg %s\n", rounds, loadAvg())
	fmt.Fprintf(&out, "%-6s %14s %14s %22s %22s\n", "", "exec p50 ms", "exec p99 ms", "call_tool round trip", "cexec's share per call")
	for _, b := range backends {
		fmt.Fprintf(&out, "%-6s %14.2f %14.2f %19.3f ms %19.3f ms\n", b.name, median(b.p50), median(b.p99), median(b.seq), median(b.call))
	}
	t.Log("\n" + out.String())
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
