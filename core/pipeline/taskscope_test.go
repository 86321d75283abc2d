package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

func TestTaskScopes(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	g := f.gen("rules", func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		if !slices.ContainsFunc(req.Tools, func(t codegen.Tool) bool { return t.ID == "memory/open_nodes" }) {
			return codegen.GenerateResponse{Diagnostics: pluginapi.Diagnostics{{Severity: pluginapi.SeverityWarning,
				Summary: "rule remember matched but its tools are not available"}}}, nil
		}
		return codegen.GenerateResponse{Code: "print('remembered')", Model: "rules/remember"}, nil
	})
	res := f.run(t, "remember that Alice works at Acme")
	reqs := g.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d Generate calls, want 2 (selected, then fallback)", len(reqs))
	}
	if got, want := ids(reqs[0].Tools), []string{"fs/read_text_file", "fs/list_directory"}; !slices.Equal(got, want) {
		t.Errorf("selected scope %v, want the search's order %v", got, want)
	}
	fallback := ids(reqs[1].Tools)
	if len(fallback) != 7 || !slices.Equal(fallback[:2], ids(reqs[0].Tools)) {
		t.Errorf("fallback scope %v: want the selection first, then the whole (small) catalog", fallback)
	}
	if res.ToolsDiscovered != 7 || res.ToolsSelected != 7 || !res.Attempts[1].Fallback || res.Attempts[0].Fallback {
		t.Errorf("discovered %d selected %d attempts %+v", res.ToolsDiscovered, res.ToolsSelected, res.Attempts)
	}
	tool := reqs[0].Tools[0]
	if tool.Module != "servers.fs" || tool.Function != "read_text_file" || !strings.Contains(tool.StubSource, "def fs_read_text_file") {
		t.Errorf("tool as generators see it: %+v", tool)
	}

	// A catalog larger than FallbackCatalog: the selected tools' servers only.
	f.tasks.Config.FallbackCatalog = 5
	f.search.ids = []string{"memory/create_entities"}
	res = f.run(t, "remember that Bob likes tea")
	reqs = g.requests()[2:]
	if got := ids(reqs[len(reqs)-1].Tools); !slices.Equal(got, []string{"memory/create_entities", "memory/open_nodes", "memory/add_observations"}) {
		t.Errorf("fallback scope of a large catalog %v: want the memory server's tools", got)
	}
	if res.Status != TaskOK {
		t.Errorf("status %s", res.Status)
	}
}

// TestTaskModelLearned: a generator that once reported tokens is a model,
// even when a later failed answer names none.
func TestTaskModelLearned(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	calls := 0
	g := f.gen("llm", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		calls++
		if calls == 1 {
			return codegen.GenerateResponse{Code: "print(1)", Usage: codegen.Usage{PromptTokens: 5, CompletionTokens: 1}}, nil
		}
		return codegen.GenerateResponse{}, nil
	})
	if res := f.run(t, "one"); res.Status != TaskOK {
		t.Fatalf("status %s", res.Status)
	}
	res := f.run(t, "two")
	if res.Status != TaskNoCode || len(g.requests()) != 2 {
		t.Errorf("status %s after %d calls: a model must not be asked again with every tool", res.Status, len(g.requests()))
	}
}

func TestTaskTenantScope(t *testing.T) {
	f := newFixture(t, workspace.Quota{AllowedServers: []string{"memory", "github"}})
	f.search.ids = []string{"fs/read_text_file", "memory/open_nodes"}
	g := f.gen("rules", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		return codegen.GenerateResponse{}, nil
	})
	res := f.run(t, "what do you know about Alice?")
	if len(f.search.servers) != 1 || !slices.Equal(f.search.servers[0], []string{"skills", "memory"}) {
		t.Errorf("search restricted to %v, want the shared skills and the allowed servers present in the catalog", f.search.servers)
	}
	for _, req := range g.requests() {
		for _, tool := range req.Tools {
			if tool.Server != "memory" {
				t.Errorf("tenant may not use %s, but the generator saw it", tool.ID)
			}
		}
	}
	if res.ToolsDiscovered != 3 || res.Status != TaskNoCode {
		t.Errorf("discovered %d, status %s", res.ToolsDiscovered, res.Status)
	}
}

func TestTaskSearchFails(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.search.err = errors.New("selector restarting")
	g := f.gen("rules", func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		if len(req.Tools) == 0 {
			return codegen.GenerateResponse{}, nil
		}
		return codegen.GenerateResponse{Code: "print(1)"}, nil
	})
	res := f.run(t, "list the files")
	if res.Status != TaskOK || len(g.requests()) != 2 || res.ToolsSelected != 7 {
		t.Fatalf("status %s after %d calls, selected %d", res.Status, len(g.requests()), res.ToolsSelected)
	}
	if len(res.Diagnostics) != 1 || res.Diagnostics[0].Severity != pluginapi.SeverityWarning ||
		!strings.Contains(res.Diagnostics[0].Detail, "selector restarting") {
		t.Errorf("diagnostics %+v", res.Diagnostics)
	}
}
