package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testpeers"
)

// startHCL loads servers (mcp_server and tenant blocks of cexec.hcl) and
// starts a catalog of them, closed when the test ends.
func startHCL(t testing.TB, env map[string]string, servers string) (*Catalog, *config.Config) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "cexec.hcl")
	src := fmt.Sprintf("cexec {\n  data_dir = %q\n}\n%s", filepath.Join(dir, "data"), servers)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, diags := config.Load(path, config.Overrides{LookupEnv: lookup})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	c, err := New(cfg, Options{Logger: testpeers.Logger(t, "catalog", hclog.Debug), ServersDir: filepath.Join(dir, "servers"), MinBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c, cfg
}

// instances returns the running instances of server by tenant.
func instances(c *Catalog, server string) map[string]InstanceStatus {
	st, _ := c.Server(server)
	out := map[string]InstanceStatus{}
	for _, in := range st.Instances {
		out[in.Tenant] = in
	}
	return out
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// startMemory starts a catalog whose one server is the reference memory
// server scoped per tenant, each instance with its own graph file; extra
// adds attributes to its block.
func startMemory(t testing.TB, extra string) (*Catalog, *config.Config) {
	t.Helper()
	return startHCL(t, nil, fmt.Sprintf(`
mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = "${tenant.dir}/memory.jsonl" }
  scope   = "tenant"
  %s
}`, testpeers.Bin(t, "mcp-server-memory"), extra))
}

func TestTenantInstancesSeparateState(t *testing.T) {
	c, cfg := startMemory(t, "")
	ctx := t.Context()
	// Discovered through the default tenant's instance at start.
	if st, _ := c.Server("memory"); st.State != StateReady || st.Tools == 0 || st.Scope != config.ScopeTenant {
		t.Fatalf("after start: %+v", st)
	}
	if _, err := c.Call(ctx, "acme", "memory", "create_entities", json.RawMessage(
		`{"entities":[{"name":"Alice","entityType":"person","observations":["alice@example.com"]}]}`)); err != nil {
		t.Fatal(err)
	}
	graph := func(tenant string) string {
		res, err := c.Call(ctx, tenant, "memory", "read_graph", nil)
		if err != nil {
			t.Fatalf("read_graph as %s: %v", tenant, err)
		}
		b, _ := json.Marshal(res)
		return string(b)
	}
	tests := []struct {
		tenant string
		sees   bool
	}{{"acme", true}, {"default", false}, {"beta", false}}
	for _, tt := range tests {
		if got := strings.Contains(graph(tt.tenant), "alice@example.com"); got != tt.sees {
			t.Errorf("tenant %s sees acme's entity: %v, want %v", tt.tenant, got, tt.sees)
		}
	}
	ins := instances(c, "memory")
	if len(ins) != 3 || ins["acme"].PID == ins["default"].PID || ins["acme"].PID == 0 {
		t.Errorf("instances: %+v", ins)
	}
	dir := cfg.TenantServerDir("acme", "memory")
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("acme's data folder: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "memory.jsonl")); err != nil || !strings.Contains(string(b), "alice@example.com") {
		t.Errorf("acme's memory file: %q %v", b, err)
	}

	// Concurrent first calls of a tenant start one instance.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Call(ctx, "gamma", "memory", "read_graph", nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if in := instances(c, "memory")["gamma"]; in.PID == 0 || in.Restarts != 0 {
		t.Errorf("gamma: %+v", in)
	}
	if n := len(instances(c, "memory")); n != 4 {
		t.Errorf("%d instances, want 4", n)
	}
}

func TestTenantInstanceIdleStop(t *testing.T) {
	c, _ := startMemory(t, `idle_timeout = "20ms"`)
	ctx := t.Context()
	if _, err := c.Call(ctx, "acme", "memory", "read_graph", nil); err != nil {
		t.Fatal(err)
	}
	// The listing may already miss it; the pid is from the call's instance.
	first := instances(c, "memory")["acme"].PID
	eventually(t, "idle instances to stop", 30*time.Second, func() bool { return len(instances(c, "memory")) == 0 })
	if first != 0 {
		eventually(t, "the idle server process to exit", 10*time.Second, func() bool { return !alive(first) })
	}
	if st, _ := c.Server("memory"); st.State != StateReady {
		t.Errorf("with no instance the server is %s, want ready (instances start on demand)", st.State)
	}
	if _, err := c.Call(ctx, "acme", "memory", "read_graph", nil); err != nil {
		t.Fatalf("call after idle stop: %v", err)
	}
}

// TestTenantRemoved stops a removed tenant's instance and leaves the
// others running.
func TestTenantRemoved(t *testing.T) {
	c, _ := startMemory(t, "")
	ctx := t.Context()
	for _, tenant := range []string{"acme", "beta"} {
		if _, err := c.Call(ctx, tenant, "memory", "read_graph", nil); err != nil {
			t.Fatal(err)
		}
	}
	acme, beta := instances(c, "memory")["acme"].PID, instances(c, "memory")["beta"].PID
	c.RemoveTenant("acme")
	if ins := instances(c, "memory"); ins["acme"].PID != 0 || ins["beta"].PID != beta {
		t.Fatalf("after removing acme: %+v", ins)
	}
	if acme != 0 {
		eventually(t, "the removed tenant's server process to exit", 10*time.Second, func() bool { return !alive(acme) })
	}
}

func TestTenantMaxInstances(t *testing.T) {
	bin := testpeers.Bin(t, "mcp-server-everything")
	c, _ := startHCL(t, nil, fmt.Sprintf(`
mcp_server "everything" {
  command       = %q
  args          = ["stdio"]
  scope         = "tenant"
  max_instances = 2
}`, bin))
	ctx := t.Context()
	echo := func(ctx context.Context, tenant string) error {
		_, err := c.Call(ctx, tenant, "everything", "echo", json.RawMessage(`{"message":"hi"}`))
		return err
	}
	// default (discovery) and acme run; beta's start stops the least
	// recently used idle one, default.
	for _, tenant := range []string{"acme", "beta"} {
		if err := echo(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	if ins := instances(c, "everything"); len(ins) != 2 || ins["acme"].PID == 0 || ins["beta"].PID == 0 {
		t.Fatalf("instances: %+v", ins)
	}

	// With both busy, a third tenant gets a clear error at once.
	busy, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, tenant := range []string{"acme", "beta"} {
		wg.Go(func() {
			_, _ = c.Call(busy, tenant, "everything", "trigger-long-running-operation", json.RawMessage(`{"duration": 30, "steps": 1}`))
		})
	}
	eventually(t, "both instances to be busy", 10*time.Second, func() bool {
		ins := instances(c, "everything")
		return ins["acme"].InFlight == 1 && ins["beta"].InFlight == 1
	})
	err := echo(ctx, "gamma")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "max_instances (2)") {
		t.Errorf("third tenant: %v, want ErrUnavailable naming max_instances", err)
	}
	cancel()
	wg.Wait()
	if err := echo(ctx, "gamma"); err != nil {
		t.Errorf("third tenant once one is idle: %v", err)
	}
	if ins := instances(c, "everything"); len(ins) != 2 {
		t.Errorf("instances: %+v", ins)
	}
}

func TestTenantInstanceCrash(t *testing.T) {
	bin := testpeers.Bin(t, "mcp-server-everything")
	c, _ := startHCL(t, nil, fmt.Sprintf(`
mcp_server "everything" {
  command = %q
  args    = ["stdio"]
  scope   = "tenant"
}`, bin))
	ctx := t.Context()
	for _, tenant := range []string{"acme", "beta"} {
		if _, err := c.Call(ctx, tenant, "everything", "echo", json.RawMessage(`{"message":"hi"}`)); err != nil {
			t.Fatal(err)
		}
	}
	before := instances(c, "everything")
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "acme", "everything", "trigger-long-running-operation", json.RawMessage(`{"duration": 30, "steps": 1}`))
		errc <- err
	}()
	eventually(t, "acme's call to be in flight", 10*time.Second, func() bool { return instances(c, "everything")["acme"].InFlight == 1 })
	if err := syscall.Kill(before["acme"].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("acme's call in flight: %v, want ErrConnectionLost", err)
	}
	res, err := c.Call(ctx, "acme", "everything", "echo", json.RawMessage(`{"message":"back"}`))
	if err != nil {
		t.Fatalf("acme's call after the crash: %v", err)
	}
	if txt := res.Content[0].(mcp.TextContent).Text; !strings.Contains(txt, "back") {
		t.Errorf("echo: %q", txt)
	}
	after := instances(c, "everything")
	if a := after["acme"]; a.PID == before["acme"].PID || a.Restarts != 1 {
		t.Errorf("acme after the crash: %+v (pid before %d)", a, before["acme"].PID)
	}
	if b := after["beta"]; b.PID != before["beta"].PID || b.Restarts != 0 {
		t.Errorf("beta's instance was touched by acme's crash: %+v", b)
	}
}

// TestTenantHeaders checks that each tenant's session of an HTTP server
// carries that tenant's headers, and only those.
func TestTenantHeaders(t *testing.T) {
	srv := server.NewMCPServer("headers", "1.0.0")
	type authKey struct{}
	srv.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprint(ctx.Value(authKey{}))), nil
	})
	var mu sync.Mutex
	seen := map[string]bool{} // "X-Tenant Authorization" of every request
	h := server.NewStreamableHTTPServer(srv, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, authKey{}, r.Header.Get("Authorization")+" "+r.Header.Get("X-Tenant"))
	}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Tenant")+" "+r.Header.Get("Authorization")] = true
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	c, _ := startHCL(t, map[string]string{"SHARED_TOKEN": "shared-secret", "ACME_TOKEN": "acme-secret"}, fmt.Sprintf(`
mcp_server "remote" {
  url     = %q
  headers = { Authorization = "Bearer ${env("SHARED_TOKEN")}", X-Tenant = tenant.id }
  scope   = "tenant"
}
tenant "acme" {
  mcp_server "remote" {
    headers = { Authorization = "Bearer ${env("ACME_TOKEN")}" }
  }
}`, ts.URL+"/mcp"))
	// The server echoes the header, whose token came from env(): the
	// caller gets it masked; seen below has what went out.
	tests := []struct{ tenant, want string }{
		{"acme", "Bearer (sensitive) acme"},
		{"beta", "Bearer (sensitive) beta"},
		{"acme", "Bearer (sensitive) acme"},
	}
	for _, tt := range tests {
		res, err := c.Call(t.Context(), tt.tenant, "remote", "whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(mcp.TextContent).Text; got != tt.want {
			t.Errorf("tenant %s's call carried %q, want %q", tt.tenant, got, tt.want)
		}
	}
	// Every request, from discovery to calls, carried one tenant's own
	// headers: no tenant's token went out under another's name.
	mu.Lock()
	defer mu.Unlock()
	want := map[string]bool{"default Bearer shared-secret": true, "acme Bearer acme-secret": true, "beta Bearer shared-secret": true}
	if !maps.Equal(seen, want) {
		t.Errorf("requests carried %v, want %v", seen, want)
	}
}

// BenchmarkTenantInstanceStart measures a tenant's first call to a
// tenant-scoped reference memory server (start the process, initialize,
// list tools, call) and reports the resident memory of one instance.
func BenchmarkTenantInstanceStart(b *testing.B) {
	c, _ := startMemory(b, `max_instances = 4`)
	ctx := b.Context()
	var rss int64
	i := 0
	for b.Loop() {
		tenant := fmt.Sprintf("t%d", i)
		i++
		if _, err := c.Call(ctx, tenant, "memory", "read_graph", nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		rss += rssOf(instances(c, "memory")[tenant].PID)
		b.StartTimer()
	}
	b.ReportMetric(float64(rss)/float64(i)/(1<<20), "MiB-rss/instance")
}

// rssOf is a process's resident memory in bytes, 0 if unknown.
func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}
