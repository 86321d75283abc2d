package catalog

import (
	"path/filepath"
	"time"

	"github.com/cexec/cexec/core/catalog/stubgen"
)

// install renders the stub tree of up (every upstream server's tools),
// writes it into ServersDir (unless "-"), then makes up and local the
// catalog's content, with each tool's StubInfo, in one step. The whole tree
// is generated each time: package and function names are unique per tree,
// and stubgen.Write deletes the packages of servers it is not given. Called
// with genMu held.
func (c *Catalog) install(up map[string][]Tool, local []Tool) {
	start := time.Now()
	var servers []stubgen.Server
	for _, u := range c.set().list {
		tools := up[u.cfg.Name]
		if len(tools) == 0 {
			continue
		}
		s := stubgen.Server{Name: u.cfg.Name, Tools: make([]stubgen.Tool, len(tools))}
		for i := range tools {
			s.Tools[i] = tools[i].stubgenTool()
		}
		servers = append(servers, s)
	}
	localPkgs := map[string]bool{}
	for _, t := range local {
		localPkgs[t.Server] = true
	}

	pkgs := stubgen.Generate(servers)
	stubs := map[string]StubInfo{}
	src := map[string][]byte{}
	for _, p := range pkgs {
		if localPkgs[p.Name] {
			c.log.Warn("a local tools package has the same name as a server's stub package; sandboxed code sees only one of them", "package", p.Name, "server", p.Server)
		}
		for _, s := range p.Stubs {
			id := p.Server + "/" + s.Tool
			stubs[id] = StubInfo{Module: s.Module, Function: s.Function, Import: s.Import(), Signature: s.Signature, Path: s.Path}
			src[id] = p.Files[s.Path]
			for _, w := range s.Warnings {
				c.log.Debug("stub generation", "tool", id, "warning", w)
			}
		}
	}
	if c.opts.ServersDir != "-" {
		rep, err := stubgen.Write(filepath.Dir(c.opts.ServersDir), pkgs)
		if err != nil {
			c.log.Error("write stub tree", "dir", c.opts.ServersDir, "error", err)
		}
		for _, p := range rep.Skipped {
			c.log.Warn("stub tree: hand-written file or package left alone; the stubs meant for it are not installed", "path", p)
		}
		c.log.Debug("stub tree written", "written", len(rep.Written), "unchanged", rep.Unchanged, "removed", len(rep.Removed), "took", time.Since(start))
	}

	index := make(map[string]*Tool)
	for _, tools := range up {
		for _, t := range tools {
			t.Stub = stubs[t.ID]
			index[t.ID] = &t
		}
	}
	for _, t := range local {
		if _, ok := index[t.ID]; !ok { // upstream servers win; readLocal already warned
			index[t.ID] = &t
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upTools, c.local, c.stubSrc, c.index = up, local, src, index
}
