package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// serverMounts is the stub tree a tenant's sandboxes see at /cexec/servers.
// A tenant that may call every server sees all of servers_dir. Otherwise
// each entry of servers_dir is bound on its own, leaving out the generated
// packages of servers outside its allowed_servers, so that their tools are
// not even visible; hand-written local tool packages stay. A generated
// package shows only when the catalog names it as an allowed server's, so
// one written a moment before the catalog knows it stays hidden.
//
// The tree is read at each creation: a new sandbox sees the current one.
// Files within a bound package follow the catalog in warm sandboxes too,
// but a package that appears later shows only in sandboxes created after.
func (s *services) serverMounts(t *workspace.Tenant) ([]sandbox.Mount, error) {
	dir := s.cfg.Daemon.ServersDir
	if t.Quota().AllowedServers == nil {
		return []sandbox.Mount{{Source: dir, Target: sandboxServers, ReadOnly: true}}, nil
	}
	allowed := map[string]bool{}
	for _, tool := range s.catalog.Tools() {
		if tool.Local == nil && t.Allowed(tool.Server) {
			allowed[stubPackage(tool.Stub.Module)] = true
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read servers_dir: %w", err)
	}
	var out []sandbox.Mount
	for _, e := range entries {
		src := filepath.Join(dir, e.Name())
		if e.IsDir() && !allowed[e.Name()] && stubgen.IsGeneratedPackage(src) {
			continue
		}
		out = append(out, sandbox.Mount{Source: src, Target: sandboxServers + "/" + e.Name(), ReadOnly: true})
	}
	return out, nil
}
