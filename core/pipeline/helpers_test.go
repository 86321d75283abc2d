package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// The fakes below stand in for the plugins and the sandbox at their Go
// interfaces: these tests are about the orchestration (chain order,
// scopes, repair, denials, tokens, timings). e2e/task_test.go runs the real plugins,
// sandbox and reference servers.

type fakeGen struct {
	name string
	gen  func(ctx context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error)

	mu   sync.Mutex
	reqs []codegen.GenerateRequest
}

func (g *fakeGen) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: g.name, Kind: pluginapi.KindCodegen}, nil
}

func (g *fakeGen) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (g *fakeGen) Generate(ctx context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	g.mu.Unlock()
	return g.gen(ctx, req)
}

func (g *fakeGen) requests() []codegen.GenerateRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.reqs)
}

// code always answers with src, as a model-free generator would.
func code(src string) func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
	return func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		return codegen.GenerateResponse{Code: src, Model: "rules/test"}, nil
	}
}

// emailGuard is a guard plugin that detects e-mail addresses, for a real
// guard layer (core/guard with a vault) in the tests.
type emailGuard struct{ guard.Unimplemented }

var emailRE = regexp.MustCompile(`[a-z]+@[a-z]+\.[a-z]+`)

func (emailGuard) Detect(_ context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	var out []guard.Span
	for _, m := range emailRE.FindAllStringIndex(req.Text, -1) {
		out = append(out, guard.Span{Start: m[0], End: m[1], Type: "EMAIL", Score: 1})
	}
	return out, nil
}

type fakePlugins struct {
	gens map[string]*fakeGen
}

func (p *fakePlugins) Codegen(name string) (codegen.Codegen, error) {
	if g, ok := p.gens[name]; ok {
		return g, nil
	}
	return nil, fmt.Errorf("plugin codegen.%s is failed (exit status 1): %w", name, pluginapi.ErrPluginShutdown)
}

// fakeRunner answers each execution with the next scripted result (the
// last one repeats).
type fakeRunner struct {
	results []*CodeResult
	err     error

	mu   sync.Mutex
	reqs []CodeRequest
}

func (f *fakeRunner) ExecuteCode(_ context.Context, req CodeRequest) (*CodeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return nil, f.err
	}
	r := *f.results[min(len(f.reqs), len(f.results))-1]
	r.Session = req.Session
	return &r, nil
}

func ok(stdout string) *CodeResult {
	return &CodeResult{Stdout: []byte(stdout), ExecResult: sandbox.ExecResult{SandboxOK: true}}
}

func raised(typ, msg string) *CodeResult {
	return &CodeResult{ExecResult: sandbox.ExecResult{ExitCode: 1, SandboxOK: true, Error: &sandbox.ExecError{
		Type: typ, Message: msg,
		Traceback: "Traceback (most recent call last):\n  File \"<main>\", line 1, in <module>\n" + typ + ": " + msg + "\n"}}}
}

type fakeCatalog struct{ tools []catalog.Tool }

func (c *fakeCatalog) Tool(server, name string) (catalog.Tool, bool) {
	for _, t := range c.tools {
		if t.Server == server && t.Name == name {
			return t, true
		}
	}
	return catalog.Tool{}, false
}

func (c *fakeCatalog) Tools() []catalog.Tool { return slices.Clone(c.tools) }

func (c *fakeCatalog) StubSource(id string) ([]byte, bool) {
	return []byte("def " + strings.ReplaceAll(id, "/", "_") + "(): ...\n"), true
}

func toolsOf(server string, names ...string) []catalog.Tool {
	var out []catalog.Tool
	for _, n := range names {
		out = append(out, catalog.Tool{ID: server + "/" + n, Server: server, Name: n, Description: n + " of " + server,
			Stub: catalog.StubInfo{Module: "servers." + server + "." + n, Function: n, Import: "from servers." + server + " import " + n}})
	}
	return out
}

// fakeSearch returns fixed ids, or fails.
type fakeSearch struct {
	ids []string
	err error

	mu      sync.Mutex
	servers [][]string
	limits  []int
}

func (s *fakeSearch) SearchTools(_ context.Context, _ string, limit int, servers []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers = append(s.servers, servers)
	s.limits = append(s.limits, limit)
	return s.ids, s.err
}

type fixture struct {
	tasks   *Tasks
	runner  *fakeRunner
	search  *fakeSearch
	plugins *fakePlugins
	ws      *workspace.Manager
}

func newFixture(t *testing.T, quota workspace.Quota) *fixture {
	t.Helper()
	ws, err := workspace.New(workspace.Options{DataDir: t.TempDir(), DefaultQuota: quota})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	tools := append(toolsOf("fs", "list_directory", "read_text_file", "write_file", "search_files"),
		toolsOf("memory", "create_entities", "open_nodes", "add_observations")...)
	f := &fixture{
		runner:  &fakeRunner{results: []*CodeResult{ok("done\n")}},
		search:  &fakeSearch{ids: []string{"fs/read_text_file", "fs/list_directory"}},
		plugins: &fakePlugins{gens: map[string]*fakeGen{}},
		ws:      ws,
	}
	f.tasks = &Tasks{
		Exec:    f.runner,
		Search:  f.search,
		Catalog: &fakeCatalog{tools: tools},
		Plugins: f.plugins,
		Tenants: ws,
		Config:  TaskConfig{MaxRepairs: 2, SearchLimit: 2},
	}
	return f
}

func (f *fixture) gen(name string, fn func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error)) *fakeGen {
	g := &fakeGen{name: name, gen: fn}
	f.plugins.gens[name] = g
	f.tasks.Config.Codegen = append(f.tasks.Config.Codegen, name)
	return g
}

func (f *fixture) run(t *testing.T, task string) *TaskResult {
	t.Helper()
	res, err := f.tasks.ExecuteTask(context.Background(), TaskRequest{Tenant: "acme", Task: task})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func ids(tools []codegen.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.ID
	}
	return out
}
