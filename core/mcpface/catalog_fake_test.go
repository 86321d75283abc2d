package mcpface

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/pluginapi"
)

// testCatalog serves the captured tool lists of the reference servers.
type testCatalog struct {
	servers []Server
	tools   []Tool
	src     map[string]string
	// files are local tools modules by path.
	files map[string]string
	// allowed limits a tenant to some servers; tenants not in it see all.
	allowed map[string][]string
}

// fixtures are captured tools/list responses of real servers.
var fixtures = []string{"server-everything-2026.8.31.json", "server-memory-2026.8.31.json"}

// newTestCatalog loads the fixtures, renders their stubs and writes the stub
// tree into a directory code can import it from.
func newTestCatalog(t testing.TB) (*testCatalog, string) {
	t.Helper()
	var srvs []stubgen.Server
	for _, name := range fixtures {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "core/catalog/stubgen/testdata/refservers", name))
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			Server string `json:"server"`
			Tools  []struct {
				Name         string          `json:"name"`
				Title        string          `json:"title"`
				Description  string          `json:"description"`
				InputSchema  json.RawMessage `json:"inputSchema"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatal(err)
		}
		s := stubgen.Server{Name: fx.Server}
		for _, ft := range fx.Tools {
			s.Tools = append(s.Tools, stubgen.Tool{Name: ft.Name, Title: ft.Title, Description: ft.Description,
				InputSchema: ft.InputSchema, OutputSchema: ft.OutputSchema})
		}
		srvs = append(srvs, s)
	}
	pkgs := stubgen.Generate(srvs)
	root := t.TempDir()
	if _, err := stubgen.Write(root, pkgs); err != nil {
		t.Fatal(err)
	}
	c := &testCatalog{src: map[string]string{}, files: map[string]string{}, allowed: map[string][]string{}}
	for i, p := range pkgs {
		c.servers = append(c.servers, Server{Name: p.Server, Package: p.Name, State: "connected", Tools: len(p.Stubs)})
		for j, st := range p.Stubs {
			tl := srvs[i].Tools[j]
			c.tools = append(c.tools, Tool{Server: p.Server, Name: st.Tool, Title: tl.Title, Description: tl.Description,
				Import: st.Import(), Signature: st.Signature, Path: st.Path, OutputSchema: tl.OutputSchema})
			c.src[p.Server+"/"+st.Tool] = string(p.Files[st.Path])
		}
	}
	return c, root
}

func (c *testCatalog) visible(tenant, server string) bool {
	l, ok := c.allowed[tenant]
	return !ok || slices.Contains(l, server)
}

func (c *testCatalog) Servers(_ context.Context, sc Scope) ([]Server, error) {
	var out []Server
	for _, s := range c.servers {
		if c.visible(sc.Tenant, s.Name) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (c *testCatalog) Tools(_ context.Context, sc Scope, server string) ([]Tool, error) {
	if server != "" && (!c.visible(sc.Tenant, server) || !slices.ContainsFunc(c.servers, func(s Server) bool { return s.Name == server })) {
		return nil, fmt.Errorf("server %q: %w", server, pluginapi.ErrNotFound)
	}
	var out []Tool
	for _, t := range c.tools {
		if (server == "" || t.Server == server) && c.visible(sc.Tenant, t.Server) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (c *testCatalog) StubSource(_ context.Context, sc Scope, server, tool string) (string, error) {
	src, ok := c.src[server+"/"+tool]
	if !ok || !c.visible(sc.Tenant, server) {
		return "", fmt.Errorf("tool %s/%s: %w", server, tool, pluginapi.ErrNotFound)
	}
	return src, nil
}

func (c *testCatalog) LocalFile(_ context.Context, sc Scope, path string) (string, error) {
	for _, t := range c.tools {
		if t.Local && t.Path == path && c.visible(sc.Tenant, t.Server) {
			return c.files[path], nil
		}
	}
	return "", fmt.Errorf("local tools file %s: %w", path, pluginapi.ErrNotFound)
}

// wordSearcher ranks tools, and the shared skills as a selector indexes
// them, by how many query words their name and description contain.
type wordSearcher struct {
	c      *testCatalog
	shared []Skill
}

var wordRE = regexp.MustCompile(`[a-z0-9]+`)

func (s wordSearcher) Search(ctx context.Context, sc Scope, query string, limit int) ([]Hit, error) {
	tools, err := s.c.Tools(ctx, sc, "")
	if err != nil {
		return nil, err
	}
	words := wordRE.FindAllString(strings.ToLower(query), -1)
	score := func(text string) float64 {
		n := 0.0
		for _, w := range words {
			if len(w) > 2 && strings.Contains(strings.ToLower(text), w) {
				n++
			}
		}
		return n
	}
	var hits []Hit
	for _, t := range tools {
		if n := score(t.Name + " " + strings.ReplaceAll(t.Name, "-", " ") + " " + t.Description); n > 0 {
			hits = append(hits, Hit{Server: t.Server, Tool: t.Name, Score: n})
		}
	}
	for _, k := range s.shared {
		if n := score(strings.ReplaceAll(k.Name, "_", " ") + " " + k.Description); n > 0 {
			hits = append(hits, Hit{Skill: k.Name, Score: n})
		}
	}
	slices.SortStableFunc(hits, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}
