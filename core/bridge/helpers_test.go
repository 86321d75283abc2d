package bridge

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
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
		{Name: "filesystem", Transport: config.TransportStdio, Command: testpeers.Bin(t, "mcp-server-filesystem"), Args: []string{f.data}, Timeout: 30 * time.Second},
		{Name: "memory", Transport: config.TransportStdio, Command: testpeers.Bin(t, "mcp-server-memory"),
			Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}, Timeout: 30 * time.Second},
		{Name: "everything", Transport: config.TransportStdio, Command: testpeers.Bin(t, "mcp-server-everything"), Args: []string{"stdio"}, Timeout: 30 * time.Second},
	}
	opts := catalog.Options{Logger: testpeers.Logger(t, "", hclog.Warn), ServersDir: f.stubs, MinBackoff: 50 * time.Millisecond}
	if local {
		testutil.NeedPython(t)
		opts.LocalServersDir = filepath.Join(repoRoot(t), "servers")
		opts.Scanner = pythonScanner{}
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
	if local {
		if err := f.cat.RefreshLocal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.b = New(f.cat, testpeers.Logger(t, "", hclog.Warn), Limits{})
	return f
}

// pythonScanner reads local tools with the host's Python, unsandboxed: the
// tests here call them; reading them in a real sandbox is the daemon's test.
type pythonScanner struct{}

func (pythonScanner) Scan(ctx context.Context, req catalog.ScanRequest) ([]byte, error) {
	return testutil.RunPython(ctx, req.Program(req.Dir), req.MaxOutput)
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

// envelope returns the items of a rich result (a ContentKey envelope).
func envelope(t *testing.T, v any) []map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	raw, ok := m[ContentKey].([]any)
	if !ok || len(m) != 1 {
		t.Fatalf("result %T %v, want a %s envelope", v, v, ContentKey)
	}
	items := make([]map[string]any, len(raw))
	for i, it := range raw {
		items[i], _ = it.(map[string]any)
	}
	return items
}
