package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/core/config"
)

// TestServerMounts: a tenant with allowed_servers gets the entries of
// servers_dir one by one, without generated packages the catalog does not
// name as its servers' (here none: the catalog has no tools yet); local
// tools stay. The default tenant gets the whole directory.
func TestServerMounts(t *testing.T) {
	dir := t.TempDir()
	servers := filepath.Join(dir, "servers")
	for name, body := range map[string]string{
		"memory/__init__.py":     stubgen.Marker + "\n",
		"filesystem/__init__.py": stubgen.Marker + "\n",
		"mytools/__init__.py":    "def hello():\n    return 1\n",
	} {
		p := filepath.Join(servers, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := fmt.Sprintf("cexec {\n  data_dir    = %q\n  servers_dir = %q\n}\n\ntenant \"limited\" {\n  allowed_servers = [\"memory\"]\n}\n",
		filepath.Join(dir, "data"), servers)
	cfg, diags := config.Load(writeConfig(t, dir, src), config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	s, err := newServices(cfg, nil, hclog.NewNullLogger())
	defer s.close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	targets := func(tenant string) map[string]string {
		req, err := s.sandboxTemplate(tenant)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range req.Mounts {
			if m.Target != "/workspace" && m.Target != "/cexec/skills" {
				if !m.ReadOnly {
					t.Errorf("%s: %s is writable", tenant, m.Target)
				}
				out[m.Target] = m.Source
			}
		}
		return out
	}
	if got := targets("limited"); len(got) != 1 || got[sandboxServers+"/mytools"] != filepath.Join(servers, "mytools") {
		t.Errorf("limited tenant's servers mounts: %v", got)
	}
	if got := targets(endpoint.DefaultTenant); len(got) != 1 || got[sandboxServers] != servers {
		t.Errorf("default tenant's servers mounts: %v", got)
	}
}
