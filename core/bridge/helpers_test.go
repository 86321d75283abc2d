package bridge

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// peer returns the path of a reference MCP server installed by
// scripts/deps.sh, skipping the test when node or the package is missing.
func peer(t testing.TB, name string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; run scripts/deps.sh to test against the reference MCP servers")
	}
	p := filepath.Join(repoRoot(t), "test", "peers", "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed (%v); run scripts/deps.sh", name, err)
	}
	return p
}

type tlogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tlogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tlogWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

func testLogger(t testing.TB, level hclog.Level) hclog.Logger {
	w := &tlogWriter{t: t}
	t.Cleanup(w.stop)
	return hclog.New(&hclog.LoggerOptions{Level: level, Output: w})
}

// fixture is a catalog of the three reference servers and a bridge over it.
type fixture struct {
	cat   *catalog.Catalog
	b     *Bridge
	data  string // the filesystem server's directory
	stubs string // the generated servers directory
}

func newFixture(t testing.TB, local bool) *fixture {
	t.Helper()
	f := &fixture{data: t.TempDir(), stubs: filepath.Join(t.TempDir(), "servers")}
	var err error
	if f.data, err = filepath.EvalSymlinks(f.data); err != nil {
		t.Fatal(err)
	}
	servers := []*config.MCPServer{
		{Name: "filesystem", Transport: config.TransportStdio, Command: peer(t, "mcp-server-filesystem"), Args: []string{f.data}, Timeout: 30 * time.Second},
		{Name: "memory", Transport: config.TransportStdio, Command: peer(t, "mcp-server-memory"),
			Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}, Timeout: 30 * time.Second},
		{Name: "everything", Transport: config.TransportStdio, Command: peer(t, "mcp-server-everything"), Args: []string{"stdio"}, Timeout: 30 * time.Second},
	}
	opts := catalog.Options{Logger: testLogger(t, hclog.Warn), ServersDir: f.stubs, MinBackoff: 50 * time.Millisecond}
	if local {
		if _, err := exec.LookPath("bwrap"); err == nil {
			opts.LocalServersDir = filepath.Join(repoRoot(t), "servers")
		}
	}
	cfg := &config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}, MCPServers: servers}
	f.cat, err = catalog.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.cat.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := f.cat.Start(ctx); err != nil {
		t.Fatal(err)
	}
	f.b = New(f.cat, testLogger(t, hclog.Warn))
	return f
}

// callErr returns err as a CallError, failing the test if it is not one.
func callErr(t testing.TB, err error) *sandbox.CallError {
	t.Helper()
	var ce *sandbox.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *sandbox.CallError", err, err)
	}
	return ce
}
