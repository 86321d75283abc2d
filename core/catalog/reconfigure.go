package catalog

import (
	"context"
	"maps"
	"reflect"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
)

// upstreamSet is the catalog's upstream servers; a new set replaces the
// old one whole, so readers never lock.
type upstreamSet struct {
	list   []*upstream
	byName map[string]*upstream
}

func (s *upstreamSet) add(u *upstream) {
	s.list = append(s.list, u)
	s.byName[u.cfg.Name] = u
}

func (c *Catalog) set() *upstreamSet { return c.ups.Load() }

// newUpstream prepares the upstream of an mcp_server block.
func (c *Catalog) newUpstream(s *config.MCPServer) *upstream {
	u := newUpstream(c, s)
	if s.Scope == config.ScopeTenant {
		u.tenants = newTenants(c, s)
	}
	return u
}

// startUpstream runs u until the catalog closes or Reconfigure stops it.
func (c *Catalog) startUpstream(u *upstream) {
	ctx, stop := context.WithCancel(c.life)
	u.stop = stop
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(u.done)
		u.run(ctx)
	}()
}

// Reconfiguration is what Reconfigure did, by server name.
type Reconfiguration struct {
	Added, Removed, Changed []string
	// Kept are changes that need a restart, by server: the server runs as
	// before (or, added, with sandbox.limits' call limits).
	Kept map[string]string
}

// Reconfigure applies a reloaded config's shared mcp_server blocks: an
// added server starts connecting, a removed one is stopped and its tools
// leave the catalog (stubs and search follow), a changed one is restarted
// with its new settings. Tenant-scoped servers, and per-server tool call
// limits (the bridge reads them at start), are left as they are and
// reported in Kept: they need a restart.
func (c *Catalog) Reconfigure(cfg *config.Config) Reconfiguration {
	c.reconf.Lock()
	defer c.reconf.Unlock()
	old := c.set()
	next := &upstreamSet{byName: map[string]*upstream{}}
	r := Reconfiguration{Kept: map[string]string{}}
	var stop []*upstream
	var start []*upstream
	for _, s := range cfg.MCPServers {
		u, ok := old.byName[s.Name]
		switch {
		case ok && sameServer(u.cfg, s):
			next.add(u)
		case ok && (u.cfg.Scope == config.ScopeTenant || s.Scope == config.ScopeTenant):
			next.add(u)
			r.Kept[s.Name] = "a tenant-scoped server's settings change with a restart"
		case ok && (u.cfg.MaxArgumentSize != s.MaxArgumentSize || u.cfg.MaxResultSize != s.MaxResultSize):
			next.add(u)
			r.Kept[s.Name] = "max_argument_size and max_result_size change with a restart"
		case ok:
			n := c.newUpstream(s)
			next.add(n)
			stop, start = append(stop, u), append(start, n)
			r.Changed = append(r.Changed, s.Name)
		case s.Scope == config.ScopeTenant:
			r.Kept[s.Name] = "a tenant-scoped server is added with a restart"
		default:
			n := c.newUpstream(s)
			next.add(n)
			start = append(start, n)
			r.Added = append(r.Added, s.Name)
			if s.MaxArgumentSize != 0 || s.MaxResultSize != 0 {
				r.Kept[s.Name] = "added, but its max_argument_size and max_result_size apply after a restart (sandbox.limits' hold until then)"
			}
		}
	}
	for _, u := range old.list {
		if _, ok := next.byName[u.cfg.Name]; ok {
			continue
		}
		if cfg.MCPServer(u.cfg.Name) == nil && u.tenants != nil {
			next.add(u)
			r.Kept[u.cfg.Name] = "a tenant-scoped server is removed with a restart"
			continue
		}
		if cfg.MCPServer(u.cfg.Name) == nil {
			stop = append(stop, u)
			r.Removed = append(r.Removed, u.cfg.Name)
		}
	}
	c.mask.Store(newSecretMask(cfg.Secrets()))
	c.ups.Store(next)
	for _, u := range stop {
		if u.stop != nil {
			u.stop()
			<-u.done
		}
	}
	for _, name := range r.Removed {
		c.replaceTools(name, nil)
		c.mu.Lock()
		delete(c.upTools, name)
		c.mu.Unlock()
	}
	for _, u := range start {
		c.startUpstream(u)
	}
	return r
}

// sameServer reports whether two blocks of one server configure it alike.
func sameServer(a, b *config.MCPServer) bool {
	return a.Command == b.Command && slices.Equal(a.Args, b.Args) && maps.Equal(a.Env, b.Env) && a.Cwd == b.Cwd &&
		a.URL == b.URL && a.Transport == b.Transport && maps.Equal(a.Headers, b.Headers) && a.Optional == b.Optional &&
		a.Timeout == b.Timeout && a.MaxArgumentSize == b.MaxArgumentSize && a.MaxResultSize == b.MaxResultSize &&
		a.Scope == b.Scope && a.IdleTimeout == b.IdleTimeout && a.MaxInstances == b.MaxInstances &&
		sameOAuth(a.OAuth, b.OAuth)
}

// sameOAuth reports whether two oauth blocks sign in alike; where a block
// stands in the file does not matter.
func sameOAuth(a, b *config.OAuth) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.DeclRange, y.DeclRange = hcl.Range{}, hcl.Range{}
	return reflect.DeepEqual(x, y)
}
