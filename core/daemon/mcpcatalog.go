package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/search"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
)

// catalogView is the catalog as one tenant sees it: upstream servers its
// allowed_servers name, local tool packages, and only the tools its policy
// lets it call.
type catalogView struct {
	cat *catalog.Catalog
	ws  *workspace.Manager
	// policy is nil without guardrails.
	policy func(tenant string) *policy.Policy
}

// visibility returns whether the tenant of sc may see a tool.
func (v catalogView) visibility(sc mcpface.Scope) (func(t *catalog.Tool) bool, error) {
	ten, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	var p *policy.Policy
	if v.policy != nil {
		p = v.policy(sc.Tenant)
	}
	return func(t *catalog.Tool) bool {
		// allowed_servers limits call_tool; local tools are plain imports.
		if t.Local == nil && !ten.Allowed(t.Server) {
			return false
		}
		return p == nil || p.CheckTool(t.Server, t.Name) == nil
	}, nil
}

// Servers lists the upstream servers the tenant may use, in config order,
// then the local tool packages.
func (v catalogView) Servers(_ context.Context, sc mcpface.Scope) ([]mcpface.Server, error) {
	visible, err := v.visibility(sc)
	if err != nil {
		return nil, err
	}
	ten, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	return serverList(v.cat.Tools(), v.cat.Servers(), ten.Allowed, visible), nil
}

// serverList is list_tools' answer without arguments: the allowed upstream servers with
// their stub package and visible tools, then each local package once (its
// directory under servers/ is its package).
func serverList(tools []catalog.Tool, statuses []catalog.ServerStatus, allowed func(string) bool, visible func(*catalog.Tool) bool) []mcpface.Server {
	counts := map[string]int{}
	pkgs := map[string]string{}
	var local []string
	for _, t := range tools {
		if t.Local != nil {
			if _, seen := pkgs[t.Server]; !seen {
				local = append(local, t.Server)
			}
			pkgs[t.Server] = t.Server
		} else if p := stubPackage(t.Stub.Module); p != "" {
			pkgs[t.Server] = p
		}
		if visible(&t) {
			counts[t.Server]++
		}
	}
	var named []stubgen.Server
	for _, s := range statuses {
		if pkgs[s.Name] == "" {
			named = append(named, stubgen.Server{Name: s.Name})
		}
	}
	// A server without tools has no stubs yet; its package is the name the
	// stub generator will give it.
	for _, p := range stubgen.Generate(named) {
		pkgs[p.Server] = p.Name
	}
	var out []mcpface.Server
	for _, s := range statuses {
		if !allowed(s.Name) {
			continue
		}
		srv := mcpface.Server{Name: s.Name, Package: pkgs[s.Name], State: string(s.State), Tools: counts[s.Name]}
		if s.State != catalog.StateReady {
			srv.Error = s.LastError
		}
		out = append(out, srv)
	}
	for _, name := range local {
		if counts[name] > 0 {
			out = append(out, mcpface.Server{Name: name, Package: pkgs[name], State: "local", Tools: counts[name]})
		}
	}
	return out
}

// stubPackage is the package of a stub module: servers.<package>.<function>.
func stubPackage(module string) string {
	parts := strings.Split(module, ".")
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
}

// Tools lists the tools of one server, or of all when server is "".
func (v catalogView) Tools(_ context.Context, sc mcpface.Scope, server string) ([]mcpface.Tool, error) {
	visible, err := v.visibility(sc)
	if err != nil {
		return nil, err
	}
	var out []mcpface.Tool
	known := server == ""
	for _, t := range v.cat.Tools() {
		if server != "" && t.Server != server {
			continue
		}
		if !visible(&t) {
			continue
		}
		known = true
		out = append(out, faceTool(&t))
	}
	if !known {
		// A configured upstream server without tools yet is known but
		// empty; anything else is unknown to this tenant.
		ten, err := v.ws.Tenant(sc.Tenant)
		if err != nil {
			return nil, err
		}
		if _, ok := v.cat.Server(server); !ok || !ten.Allowed(server) {
			return nil, fmt.Errorf("server %q: %w", server, pluginapi.ErrNotFound)
		}
	}
	return out, nil
}

func faceTool(t *catalog.Tool) mcpface.Tool {
	return mcpface.Tool{
		Server:      t.Server,
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		Import:      t.Stub.Import,
		Signature:   t.Stub.Signature,
		Path:        t.Stub.Path,
		// Shapes are rendered for search hits only: the catalog lists
		// every tool per search.
		OutputSchema: t.OutputSchema,
		Local:        t.Local != nil,
	}
}

// StubSource returns the tool's stub module (a local tool's function).
func (v catalogView) StubSource(_ context.Context, sc mcpface.Scope, server, tool string) (string, error) {
	visible, err := v.visibility(sc)
	if err != nil {
		return "", err
	}
	t, ok := v.cat.Tool(server, tool)
	if !ok || !visible(&t) {
		return "", fmt.Errorf("tool %s/%s: %w", server, tool, pluginapi.ErrNotFound)
	}
	src, ok := v.cat.StubSource(t.ID)
	if !ok {
		return "", fmt.Errorf("tool %s/%s: its stub is being generated; try again in a moment: %w", server, tool, pluginapi.ErrUnavailable)
	}
	return string(src), nil
}

// LocalFile returns the module of a local tool the tenant may see.
func (v catalogView) LocalFile(_ context.Context, sc mcpface.Scope, path string) (string, error) {
	visible, err := v.visibility(sc)
	if err != nil {
		return "", err
	}
	// Only the modules that define tools: the package may hold other files.
	if !slices.ContainsFunc(v.cat.Tools(), func(t catalog.Tool) bool { return t.Local != nil && t.Stub.Path == path && visible(&t) }) {
		return "", fmt.Errorf("local tools file %s: %w", path, pluginapi.ErrNotFound)
	}
	src, err := v.cat.LocalFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: %w", err, pluginapi.ErrNotFound)
	}
	return string(src), err
}

// searchView is search_tools over the search service (the selector
// plugin, or its substring fallback), limited to the tenant's servers.
type searchView struct {
	svc *search.Service
	v   catalogView
}

// Search returns up to limit tools and shared skills, best first. The
// face keeps only the hits the tenant may use, so a few more are asked for,
// in case its policy hides some.
func (s searchView) Search(ctx context.Context, sc mcpface.Scope, query string, limit int) ([]mcpface.Hit, error) {
	if s.svc == nil {
		return nil, fmt.Errorf("tool search is not running; list_tools still works: %w", pluginapi.ErrUnavailable)
	}
	ten, err := s.v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	req := search.Request{Query: query, Detail: search.DetailName, Limit: min(2*limit, search.MaxLimit)}
	if ten.Quota().AllowedServers != nil {
		// Shared skills are every tenant's, whatever its servers.
		req.Servers = []string{search.SkillsServer}
		servers, err := s.v.Servers(ctx, sc)
		if err != nil {
			return nil, err
		}
		for _, srv := range servers {
			req.Servers = append(req.Servers, srv.Name)
		}
	}
	res, err := s.svc.Search(ctx, req)
	if err != nil {
		return nil, err
	}
	hits := make([]mcpface.Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		if h.Kind == search.KindSkill {
			hits = append(hits, mcpface.Hit{Skill: h.Name, Score: h.Score})
			continue
		}
		hits = append(hits, mcpface.Hit{Server: h.Server, Tool: h.Name, Score: h.Score})
	}
	return hits, nil
}
