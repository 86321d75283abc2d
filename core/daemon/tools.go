package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/core/search"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

// startSearch builds search_tools over the configured selector plugin and
// keeps the plugin's index in step with the catalog, re-indexing after the
// plugin restarts (it comes back configured afresh, with an empty index).
// Without a running selector, searches use the substring fallback.
func (s *services) startSearch(host *pluginhost.Host) {
	cfg, log := s.cfg, s.log
	var sel selector.Selector
	if name := cfg.Pipeline.Selector; name != "" {
		h, err := host.Selector(name)
		switch {
		case err == nil:
			sel = h
		case errors.Is(err, pluginapi.ErrNotFound), errors.Is(err, pluginapi.ErrPluginShutdown):
			log.Warn("selector plugin is not running: search_tools falls back to substring matching", "selector", name, "error", err)
		default:
			log.Warn("selector plugin unusable: search_tools falls back to substring matching", "selector", name, "error", err)
		}
	}
	s.search = search.New(search.Options{
		Catalog:      s.catalog,
		Selector:     sel,
		SelectorName: cfg.Pipeline.Selector,
		Skills:       sharedSkills{ws: s.workspace},
		DefaultLimit: cfg.Pipeline.SearchLimit,
		Logger:       log.Named("search"),
	})
	s.search.Start()
	if sel == nil {
		return
	}
	host.OnRestart(func(kind pluginapi.Kind, name string) {
		if kind == pluginapi.KindSelector && name == cfg.Pipeline.Selector {
			log.Warn("selector plugin restarted with an empty index; re-indexing the catalog", "selector", name)
			s.search.Reindex()
		}
	})
}

// sharedSkills lists the operator's shared skills (skills_dir) for the
// search index. Tenants' own skills are not indexed: they differ per tenant
// and the selector keeps one index.
type sharedSkills struct{ ws *workspace.Manager }

// ListSkills lists the shared skills through the default tenant's handle
// (a tenant's own skills are left out).
func (v sharedSkills) ListSkills(context.Context) ([]search.Skill, error) {
	t, err := v.ws.Tenant(endpoint.DefaultTenant)
	if err != nil {
		return nil, fmt.Errorf("list shared skills: %w", err)
	}
	all, err := t.ListSkills()
	if err != nil {
		return nil, fmt.Errorf("list shared skills: %w", err)
	}
	var out []search.Skill
	for _, sk := range all {
		if sk.Shared {
			out = append(out, search.Skill{Name: sk.Name, Description: sk.Description, Import: sk.Import})
		}
	}
	return out, nil
}

// SkillCode returns a shared skill's code.
func (v sharedSkills) SkillCode(_ context.Context, name string) (string, error) {
	t, err := v.ws.Tenant(endpoint.DefaultTenant)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", name, err)
	}
	sk, err := t.GetSkill(name)
	if err != nil {
		return "", err
	}
	if !sk.Shared {
		// GetSkill prefers the tenant's own skill of that name.
		return "", fmt.Errorf("skill %s: the default tenant's own skill of that name hides the shared one", name)
	}
	return sk.Code, nil
}

// toolsView is the catalog as the control API sees it; refreshing
// everything also re-reads the shared skills into the search index.
type toolsView struct {
	*catalog.Catalog
	search *search.Service
}

// Refresh lists the server's tools again; "" refreshes every server, the
// local tools and the indexed skills.
func (v toolsView) Refresh(ctx context.Context, server string) error {
	err := v.Catalog.Refresh(ctx, server)
	if server == "" && v.search != nil {
		err = errors.Join(err, v.search.RefreshSkills(ctx))
	}
	return err
}
