package config

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Scopes of an mcp_server.
const (
	// ScopeShared: one instance (process or session) serves every tenant.
	ScopeShared = "shared"
	// ScopeTenant: each tenant gets its own instance, started on its first
	// call and stopped when idle, with its own env and headers.
	ScopeTenant = "tenant"
)

// Defaults of a tenant-scoped server.
const (
	DefaultServerIdleTimeout = 10 * time.Minute
	DefaultMaxInstances      = 16
)

// tenantVar is the root of the variables a tenant-scoped server's args,
// env, cwd and headers may use: tenant.id and tenant.dir.
const tenantVar = "tenant"

// tenantPlaceholder stands for the tenant in the values decoded at load
// time, which are checked and shown but never used to start an instance.
const tenantPlaceholder = "<tenant>"

// tenantExprs are a tenant-scoped server's attributes that may name the
// tenant, evaluated again for each tenant by ServerForTenant.
type tenantExprs struct {
	args, env, cwd, headers *hcl.Attribute
	ctx                     *hcl.EvalContext
	dir                     string
}

// ServerOverride is an `mcp_server "<name>" { env = ..., headers = ... }`
// block inside a tenant block, evaluated for that tenant.
type ServerOverride struct {
	Env       map[string]string
	Headers   map[string]string
	DeclRange hcl.Range
}

// TenantServerDir is the data folder of tenant's instance of a
// tenant-scoped server (tenant.dir in cexec.hcl):
// data_dir/tenants/<tenant>/servers/<server>. It sits beside the tenant's
// workspace, not in it, so sandboxed code cannot reach it.
func (c *Config) TenantServerDir(tenant, server string) string {
	return filepath.Join(c.Daemon.DataDir, "tenants", tenant, "servers", server)
}

// ServerForTenant returns the mcp_server name as tenant's instance runs it:
// args, env, cwd and headers evaluated with tenant.id and tenant.dir, then
// the tenant block's own env and headers for it merged over them. A shared
// server is returned as it is.
func (c *Config) ServerForTenant(name, tenant string) (*MCPServer, error) {
	s := c.MCPServer(name)
	if s == nil {
		return nil, fmt.Errorf("unknown mcp_server %q", name)
	}
	if s.Scope != ScopeTenant {
		return s, nil
	}
	if err := ValidateTenantID(tenant); err != nil {
		return nil, err
	}
	out := *s
	// A server built in code rather than loaded has no expressions.
	if e := s.perTenant; e != nil {
		d := &decoder{ctx: tenantContext(e.ctx, tenant, c.TenantServerDir(tenant, name)), dir: e.dir}
		d.tenantValues(&out, e, nil)
		if d.diags.HasErrors() {
			return nil, fmt.Errorf("evaluate mcp_server %q for tenant %s: %w", name, tenant, errors.New(d.diags.Error()))
		}
	}
	if t := c.Tenant(tenant); t != nil {
		if o := t.Servers[name]; o != nil {
			out.Env = merged(out.Env, o.Env)
			out.Headers = merged(out.Headers, o.Headers)
		}
	}
	return &out, nil
}

func merged(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// tenantContext is base with the tenant variables set.
func tenantContext(base *hcl.EvalContext, id, dir string) *hcl.EvalContext {
	ctx := base.NewChild()
	ctx.Variables = map[string]cty.Value{tenantVar: cty.ObjectVal(map[string]cty.Value{
		"id":  cty.StringVal(id),
		"dir": cty.StringVal(dir),
	})}
	return ctx
}

// tenantValues decodes the attributes that may name the tenant into s.
// base, when not nil, records the paths of env() values for MaskedJSON.
func (d *decoder) tenantValues(s *MCPServer, e *tenantExprs, base []string) {
	sub := func(name string) []string {
		if base == nil {
			return nil
		}
		return append(append([]string(nil), base...), name)
	}
	sensitive := d.sensitive
	s.Args, _ = d.strList(e.args, sub("args"))
	s.Env, _ = d.strMap(e.env, sub("env"))
	s.Cwd = ""
	if c, _, ok := d.str(e.cwd, sub("cwd")); ok {
		s.Cwd = d.abs(c)
	}
	s.Headers, _ = d.strMap(e.headers, sub("headers"))
	if base == nil {
		d.sensitive = sensitive
	}
}

// scope decodes scope, idle_timeout and max_instances.
func (d *decoder) scope(cfg *Config, s *MCPServer, r *rawMCP, base []string) {
	s.Scope = ScopeShared
	if s.Transport == TransportBuiltin {
		// A built-in server works on the calling tenant's own data.
		s.Scope = ScopeTenant
	}
	if v, _, ok := d.str(r.Scope, append(base, "scope")); ok {
		if v == ScopeShared && s.Transport == TransportBuiltin {
			d.errorf(r.Scope.Expr.Range().Ptr(), "Invalid scope", "mcp_server %q: a built-in server runs one instance per tenant, on that tenant's data; remove scope or set it to %q.", s.Name, ScopeTenant)
		} else if v != ScopeShared && v != ScopeTenant {
			d.errorf(r.Scope.Expr.Range().Ptr(), "Invalid scope", "mcp_server %q: scope must be %q (one instance for all tenants, the default) or %q (one per tenant); got %q.", s.Name, ScopeShared, ScopeTenant, v)
		} else {
			s.Scope = v
		}
	}
	if s.Scope != ScopeTenant {
		for _, a := range []*hcl.Attribute{r.IdleTime, r.MaxInst} {
			if a != nil {
				d.errorf(a.Range.Ptr(), "Argument needs a tenant-scoped server", "mcp_server %q: %s applies to servers with scope = %q, which run one instance per tenant.", s.Name, a.Name, ScopeTenant)
			}
		}
		return
	}
	s.IdleTimeout, s.MaxInstances = DefaultServerIdleTimeout, DefaultMaxInstances
	if t, ok := d.duration(r.IdleTime, append(base, "idle_timeout")); ok {
		s.IdleTimeout = t
	}
	if n, ok := d.integer(r.MaxInst, append(base, "max_instances"), 1); ok {
		s.MaxInstances = n
	}
}

// perTenantAttrs decodes args, env, cwd and headers. A shared server's may
// not name the tenant; a tenant-scoped server's are kept for
// ServerForTenant and decoded here for a placeholder tenant, so that
// mistakes show at load time with their lines.
func (d *decoder) perTenantAttrs(cfg *Config, s *MCPServer, r *rawMCP, base []string) {
	// Only these four vary per tenant: the tool list (and so the stubs) is
	// shared, so what the server is (command, url, transport) is too.
	for _, a := range []*hcl.Attribute{r.Command, r.URL, r.Transport, r.Optional, r.Timeout, r.MaxArg, r.MaxResult} {
		if a != nil && d.tenantVarIn(a, fmt.Sprintf("mcp_server %q: %s is the same for every tenant; only args, env, cwd and headers may use tenant.id and tenant.dir.", s.Name, a.Name)) {
			d.skip(a)
		}
	}
	e := &tenantExprs{args: r.Args, env: r.Env, cwd: r.Cwd, headers: r.Headers, ctx: d.ctx, dir: d.dir}
	if s.Scope != ScopeTenant {
		for _, a := range []*hcl.Attribute{e.args, e.env, e.cwd, e.headers} {
			if a != nil && d.tenantVarIn(a, fmt.Sprintf("mcp_server %q is shared by all tenants, so there is no tenant to name; set scope = %q to run one instance per tenant.", s.Name, ScopeTenant)) {
				d.skip(a)
			}
		}
		d.tenantValues(s, e, base)
		return
	}
	s.perTenant = e
	outer := d.ctx
	d.ctx = tenantContext(outer, tenantPlaceholder, cfg.TenantServerDir(tenantPlaceholder, s.Name))
	d.tenantValues(s, e, base)
	d.ctx = outer
}

// skip makes eval pass over a, which already has its diagnostic.
func (d *decoder) skip(a *hcl.Attribute) {
	if d.skipped == nil {
		d.skipped = map[*hcl.Attribute]bool{}
	}
	d.skipped[a] = true
}

// tenantVarIn reports (as an error with detail) a use of the tenant
// variables in a, and whether there was one.
func (d *decoder) tenantVarIn(a *hcl.Attribute, detail string) bool {
	found := false
	for _, tr := range a.Expr.Variables() {
		if tr.RootName() == tenantVar {
			d.errorf(tr.SourceRange().Ptr(), "Tenant variable not allowed here", "%s", detail)
			found = true
		}
	}
	return found
}

// serverOverrides decodes a tenant block's mcp_server blocks.
func (d *decoder) serverOverrides(cfg *Config, t *Tenant, raws []*rawServerOverride, base []string) {
	for _, r := range raws {
		s := cfg.MCPServer(r.Name)
		switch {
		case s == nil:
			d.errorf(r.NameRange.Ptr(), "Unknown mcp_server", "tenant %q configures mcp_server %q, which is not configured.", t.ID, r.Name)
			continue
		case s.Scope != ScopeTenant:
			d.errorf(r.NameRange.Ptr(), "Override of a shared server", "mcp_server %q is shared by all tenants, so tenant %q cannot give it its own env or headers; set scope = %q on it (%s).", r.Name, t.ID, ScopeTenant, s.DeclRange)
			continue
		case t.Servers[r.Name] != nil:
			d.errorf(r.DeclRange.Ptr(), "Duplicate mcp_server", "tenant %q already configures mcp_server %q at %s.", t.ID, r.Name, t.Servers[r.Name].DeclRange)
			continue
		}
		if s.Transport == TransportStdio && r.Headers != nil {
			d.errorf(r.Headers.Range.Ptr(), "Headers need a remote server", "mcp_server %q runs over stdio; give tenant %q its settings through env.", r.Name, t.ID)
		}
		if s.Transport != TransportStdio && r.Env != nil {
			d.errorf(r.Env.Range.Ptr(), "Argument needs a local server", "mcp_server %q is remote; give tenant %q its settings through headers.", r.Name, t.ID)
		}
		p := append(base, "mcp_servers", r.Name)
		outer := d.ctx
		d.ctx = tenantContext(outer, t.ID, cfg.TenantServerDir(t.ID, r.Name))
		o := &ServerOverride{DeclRange: r.DeclRange}
		o.Env, _ = d.strMap(r.Env, append(p, "env"))
		o.Headers, _ = d.strMap(r.Headers, append(p, "headers"))
		d.ctx = outer
		if t.Servers == nil {
			t.Servers = map[string]*ServerOverride{}
		}
		t.Servers[r.Name] = o
	}
}
