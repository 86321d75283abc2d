package pipeline

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

// skillsServer is where the search index keeps skills (search.SkillsServer).
const skillsServer = "skills"

// search ranks the catalog and resolves the selected tools and skills. A
// failed search is a warning: model-free generators still get the fallback
// scope, and arithmetic needs no tools at all.
func (r *taskRun) search(ctx context.Context) {
	start := time.Now()
	defer func() { r.res.Timings.Search = time.Since(start) }()
	all := r.allowedTools()
	r.res.ToolsDiscovered = len(all)
	if r.p.Search == nil {
		return
	}
	limit := r.p.Config.SearchLimit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	// A tenant limited to some servers searches those only, so that
	// forbidden tools do not take the selection's places; shared skills
	// are every tenant's, whatever its servers.
	var servers []string
	if r.tenant.Quota().AllowedServers != nil {
		servers = []string{skillsServer}
		for _, t := range all {
			if !slices.Contains(servers, t.Server) {
				servers = append(servers, t.Server)
			}
		}
	}
	ids, err := r.p.Search.SearchTools(ctx, r.task, limit+maxSkills, servers)
	if err != nil {
		r.log.Warn("tool search failed; generating without a selection", "tenant", r.req.Tenant, "error", err)
		r.res.Diagnostics = append(r.res.Diagnostics, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning,
			Summary: "tool search failed", Detail: err.Error()})
		return
	}
	for _, id := range ids {
		if name, ok := strings.CutPrefix(id, skillsServer+"/"); ok {
			if len(r.skills) == maxSkills {
				continue
			}
			if s, err := r.tenant.GetSkill(name); err == nil {
				r.skills = append(r.skills, codegen.Skill{Name: s.Name, Description: s.Description, Source: s.Code})
			}
			continue
		}
		if len(r.selected) == limit {
			continue
		}
		server, name, ok := strings.Cut(id, "/")
		if !ok || !r.tenant.Allowed(server) {
			continue
		}
		if t, ok := r.p.Catalog.Tool(server, name); ok {
			r.selected = append(r.selected, r.toolFor(t))
		}
	}
}

// allowedTools is the catalog as the tenant sees it, read once per task.
func (r *taskRun) allowedTools() []catalog.Tool {
	if r.all != nil {
		return r.all
	}
	all := r.p.Catalog.Tools()
	out := make([]catalog.Tool, 0, len(all))
	for _, t := range all {
		if r.tenant.Allowed(t.Server) {
			out = append(out, t)
		}
	}
	r.all = out
	return out
}

// fallbackScope is the selection plus what a model-free generator may also
// need (see Tasks): the whole catalog when it is small, else the other
// tools of the selected tools' servers.
func (r *taskRun) fallbackScope() []codegen.Tool {
	if r.fallbackDone {
		return r.fallback
	}
	r.fallbackDone = true
	limit := r.p.Config.FallbackCatalog
	if limit <= 0 {
		limit = DefaultFallbackCatalog
	}
	all := r.allowedTools()
	have := make(map[string]bool, len(r.selected))
	servers := map[string]bool{}
	for _, t := range r.selected {
		have[t.ID] = true
		servers[t.Server] = true
	}
	small := len(all) <= limit
	r.fallback = append([]codegen.Tool(nil), r.selected...)
	for _, t := range all {
		if len(r.fallback) >= limit {
			break
		}
		if !have[t.ID] && (small || servers[t.Server]) {
			r.fallback = append(r.fallback, r.toolFor(t))
		}
	}
	return r.fallback
}

// toolFor is a catalog tool as generators see it: imported from its
// server's package, the way agents import it.
func (r *taskRun) toolFor(t catalog.Tool) codegen.Tool {
	module := t.Stub.Module
	if rest, ok := strings.CutPrefix(t.Stub.Import, "from "); ok {
		if m, _, ok := strings.Cut(rest, " import "); ok {
			module = m
		}
	}
	src, _ := r.p.Catalog.StubSource(t.ID)
	return codegen.Tool{
		ID:          t.ID,
		Server:      t.Server,
		Name:        t.Name,
		Description: t.Description,
		Module:      module,
		Function:    t.Stub.Function,
		StubSource:  string(src),
		InputSchema: t.InputSchema,
	}
}
