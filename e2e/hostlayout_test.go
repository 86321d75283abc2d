package e2e

import (
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

// TestSandboxHidesHostLayout runs programs through a real cexecd whose
// tenant id and data_dir are distinctive strings: a tenant limited by
// allowed_servers sees only its servers' stubs, and no sandbox's
// /proc/self/cgroup names the tenant, the data_dir or the socket.
func TestSandboxHidesHostLayout(t *testing.T) {
	fsServer, memServer := testpeers.Bin(t, "mcp-server-filesystem"), testpeers.Bin(t, "mcp-server-memory")
	i := slices.IndexFunc(bins.plugins, func(b string) bool { return strings.HasPrefix(b, `plugin "sandbox" "bwrap"`) })
	g := slices.IndexFunc(bins.plugins, func(b string) bool { return strings.HasPrefix(b, `plugin "guard" "pii"`) })
	if i < 0 || g < 0 {
		testutil.SkipMissing(t, "the bwrap sandbox or pii guard plugin is not built")
	}
	dir, err := os.MkdirTemp("", "cexec-e2e-layout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	const tenant = "qz7kx-tenant"
	dataDir := filepath.Join(dir, "dd-v3wq9-data")
	s := setup{dir: dir, sock: filepath.Join(dir, "run", "cexecd.sock"), config: filepath.Join(dir, "cexec.hcl")}
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`cexec {
  data_dir    = %q
  socket      = %q
  plugin_dir  = %q
  servers_dir = %q
}

%s

%s

sandbox {
  backend = "bwrap"
}

mcp_server "filesystem" {
  command = %q
  args    = [%q]
}

mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = %q }
}

tenant %q {
  allowed_servers = ["memory"]
}
`, dataDir, s.sock, bins.pluginDir, filepath.Join(dir, "servers"), bins.plugins[i], bins.plugins[g],
		fsServer, files, memServer, filepath.Join(dir, "memory.jsonl"), tenant)
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, s)
	sandboxOrSkip(t, s)
	deadline := time.Now().Add(60 * time.Second)
	for {
		srv := listServers(t, s)
		if srv["filesystem"].Tools > 0 && srv["memory"].Tools > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers not ready: %+v", srv)
		}
		time.Sleep(100 * time.Millisecond)
	}

	const probe = "import os\n" +
		"print(sorted(n for n in os.listdir('/cexec/servers') if not n.startswith('__')))\n" +
		"try:\n    import servers.filesystem\n    print('imported')\nexcept ModuleNotFoundError:\n    print('ModuleNotFoundError')\n" +
		"import servers.memory\n"
	t.Run("allowed servers only", func(t *testing.T) {
		r, _ := sbxJSON(t, s, "--tenant", tenant, "-c", probe)
		if r.Stdout != "['memory']\nModuleNotFoundError\n" || r.ExitCode != 0 {
			t.Errorf("tenant %s: %+v", tenant, r)
		}
		r, _ = sbxJSON(t, s, "-c", probe)
		if r.Stdout != "['filesystem', 'memory']\nimported\n" || r.ExitCode != 0 {
			t.Errorf("default tenant: %+v", r)
		}
	})

	t.Run("no host layout in /proc/self/cgroup or mountinfo", func(t *testing.T) {
		for _, ten := range []string{tenant, "default"} {
			r, _ := sbxJSON(t, s, "--tenant", ten, "-c", "print(open('/proc/self/cgroup').read())\nprint(open('/proc/self/mountinfo').read())")
			cgroup, mountinfo, _ := strings.Cut(r.Stdout, "\n\n")
			if r.ExitCode != 0 || cgroup == "" {
				t.Fatalf("tenant %s: %+v", ten, r)
			}
			for _, leak := range []string{tenant, dataDir, s.sock, "cexec"} {
				if strings.Contains(cgroup, leak) {
					t.Errorf("tenant %s: /proc/self/cgroup contains %q:\n%s", ten, leak, cgroup)
				}
			}
			// The workspace is its own file system (the tenant's image,
			// seen from its root) when cexecd can mount: as root, as here.
			leaks := []string{filepath.Dir(s.sock)}
			if os.Geteuid() == 0 {
				leaks = append(leaks, tenant, dataDir)
			}
			for _, leak := range leaks {
				if strings.Contains(mountinfo, leak) {
					t.Errorf("tenant %s: /proc/self/mountinfo contains %q:\n%s", ten, leak, mountinfo)
				}
			}
		}
	})
}
