package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testpeers"
)

// TestPerTenantMemoryServer drives a real cexecd whose reference memory
// server is scoped per tenant, as in the default cexec.hcl: tenant acme's
// entity (with an email) is in acme's graph only, and each tenant's calls
// reach an instance of its own.
func TestPerTenantMemoryServer(t *testing.T) {
	memServer := testpeers.Bin(t, "mcp-server-memory")
	s := newSetup(t)
	appendConfig(t, s, fmt.Sprintf(`
mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = "${tenant.dir}/memory.jsonl" }
  scope   = "tenant"
}
`, memServer))
	startDaemon(t, s)
	sandboxOrSkip(t, s)
	deadline := time.Now().Add(60 * time.Second)
	for listServers(t, s)["memory"].Tools == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("memory server not ready: %+v", listServers(t, s)["memory"])
		}
		time.Sleep(100 * time.Millisecond)
	}

	const remember = "from servers.memory import create_entities\n" +
		"create_entities(entities=[{'name': 'Alice', 'entityType': 'person', 'observations': ['alice@example.com']}])\n"
	const recall = "from servers.memory import read_graph\n" +
		"g = read_graph()\n" +
		"print(sorted(o for e in g['entities'] for o in e['observations']))\n"
	if r, code := sbxJSON(t, s, "--tenant", "acme", "-c", remember); code != 0 || r.ExitCode != 0 {
		t.Fatalf("acme creates an entity: exit %d: %+v", code, r)
	}
	tests := []struct{ tenant, want string }{
		{"default", "[]\n"},
		{"acme", "['alice@example.com']\n"},
		{"beta", "[]\n"},
	}
	for _, tt := range tests {
		r, code := sbxJSON(t, s, "--tenant", tt.tenant, "-c", recall)
		if code != 0 || r.ExitCode != 0 {
			t.Fatalf("tenant %s reads its graph: exit %d: %+v", tt.tenant, code, r)
		}
		if r.Stdout != tt.want {
			t.Errorf("tenant %s sees %q, want %q", tt.tenant, r.Stdout, tt.want)
		}
	}

	mem := listServers(t, s)["memory"]
	pids := map[string]int{}
	for _, in := range mem.Instances {
		pids[in.Tenant] = in.PID
	}
	if mem.Scope != "tenant" || len(pids) != 3 || pids["acme"] == 0 || pids["acme"] == pids["default"] || pids["acme"] == pids["beta"] {
		t.Errorf("servers ls: %+v, want one running instance per tenant", mem)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "tenants", "acme", "servers", "memory", "memory.jsonl"))
	if err != nil || !strings.Contains(string(b), "alice@example.com") {
		t.Errorf("acme's memory file: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "data", "tenants", "default", "servers", "memory", "memory.jsonl")); strings.Contains(string(b), "alice") {
		t.Errorf("default's memory file holds acme's entity: %q, %v", b, err)
	}
	table := mustCtl(t, s, "servers", "ls")
	for _, want := range []string{"per tenant (3)", "TENANT", "acme"} {
		if !strings.Contains(table, want) {
			t.Errorf("servers ls lacks %q:\n%s", want, table)
		}
	}
}
