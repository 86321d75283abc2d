package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
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

func TestTaskChain(t *testing.T) {
	usage := codegen.Usage{PromptTokens: 900, CompletionTokens: 40}
	tests := []struct {
		name string
		// first is the first generator of the chain; "second" always
		// answers with print(2).
		first         func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error)
		wantGenerator string
		wantAttempts  int
		wantFirstErr  string
		wantUsage     codegen.Usage
	}{
		{
			name:          "first answers",
			first:         code("print(1)"),
			wantGenerator: "first", wantAttempts: 1,
		},
		{
			name: "first fails",
			first: func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				return codegen.GenerateResponse{}, errors.New("status 500 after 3 retries")
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "generate: status 500 after 3 retries",
		},
		{
			name: "first, a model, writes no code: not asked again",
			first: func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				return codegen.GenerateResponse{Usage: usage, Model: "gpt", Diagnostics: pluginapi.Diagnostics{
					pluginapi.Errorf("", "the reply holds no program", "")}}, nil
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "wrote no program: the reply holds no program",
			wantUsage: usage,
		},
		{
			name: "first, a model whose request failed, writes no code: not asked again",
			first: func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				return codegen.GenerateResponse{Model: "gpt", Diagnostics: pluginapi.Diagnostics{
					pluginapi.Errorf("", "openai request failed", "status 500")}}, nil
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "wrote no program: openai request failed: status 500",
		},
		{
			name: "first, model-free, writes no code: asked again with every tool",
			first: func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				if len(req.Tools) < 7 {
					return codegen.GenerateResponse{Diagnostics: pluginapi.Diagnostics{pluginapi.Errorf("", "no matching rule could be used", "")}}, nil
				}
				return codegen.GenerateResponse{Code: "print(7)", Model: "rules/remember"}, nil
			},
			wantGenerator: "first", wantAttempts: 2, wantFirstErr: "wrote no program: no matching rule could be used",
		},
		{
			name: "first hangs past its deadline",
			first: func(ctx context.Context, _ codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				<-ctx.Done()
				return codegen.GenerateResponse{}, ctx.Err()
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "no answer within 50ms (the plugin's timeout)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, workspace.Quota{})
			f.tasks.Config.GenerateTimeouts = map[string]time.Duration{"first": 50 * time.Millisecond}
			f.gen("first", tt.first)
			f.gen("second", code("print(2)"))
			res := f.run(t, "do it")
			if res.Status != TaskOK || res.Generator != tt.wantGenerator || len(res.Attempts) != tt.wantAttempts {
				t.Fatalf("status %s, generator %s, %d attempts; want ok, %s, %d: %+v", res.Status, res.Generator, len(res.Attempts),
					tt.wantGenerator, tt.wantAttempts, res.Attempts)
			}
			if !strings.Contains(res.Attempts[0].Error, tt.wantFirstErr) {
				t.Errorf("first attempt error %q, want %q", res.Attempts[0].Error, tt.wantFirstErr)
			}
			if last := res.Attempts[len(res.Attempts)-1]; last.Error != "" || last.Code != res.Code {
				t.Errorf("last attempt %+v should hold the program that ran", last)
			}
			if res.Usage != tt.wantUsage {
				t.Errorf("usage %+v, want %+v", res.Usage, tt.wantUsage)
			}
			if got := string(res.Exec.Stdout); got != "done\n" {
				t.Errorf("stdout %q", got)
			}
			if len(f.runner.reqs) != 1 || f.runner.reqs[0].Code != res.Code || f.runner.reqs[0].Task != "do it" {
				t.Errorf("executions %+v", f.runner.reqs)
			}
		})
	}
}

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
	if len(f.search.servers) != 1 || !slices.Equal(f.search.servers[0], []string{"memory"}) {
		t.Errorf("search restricted to %v, want the allowed servers present in the catalog", f.search.servers)
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

func TestTaskRepair(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.runner.results = []*CodeResult{raised("KeyError", "'content'"), ok("42\n")}
	g := f.gen("llm", func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		src := "print(r['content'])"
		if req.Previous != nil {
			src = "print(r.get('text'))"
		}
		return codegen.GenerateResponse{Code: src, Model: "m", Usage: codegen.Usage{PromptTokens: 10, CompletionTokens: 5}}, nil
	})
	res := f.run(t, "answer")
	if res.Status != TaskOK || res.Repairs != 1 || len(res.Attempts) != 2 || res.Code != "print(r.get('text'))" {
		t.Fatalf("status %s repairs %d attempts %+v", res.Status, res.Repairs, res.Attempts)
	}
	prev := g.requests()[1].Previous
	if prev == nil || prev.Code != "print(r['content'])" || !strings.Contains(prev.Error, "KeyError: 'content'") || !strings.Contains(prev.Error, "Traceback") {
		t.Errorf("repair request's previous attempt: %+v", prev)
	}
	if !strings.Contains(res.Attempts[0].Error, "KeyError") || res.Attempts[1].Round != 1 {
		t.Errorf("attempts %+v", res.Attempts)
	}
	if res.Session == "" || f.runner.reqs[0].Session != res.Session || f.runner.reqs[1].Session != res.Session {
		t.Errorf("both executions should run in the task's session %q: %q, %q", res.Session, f.runner.reqs[0].Session, f.runner.reqs[1].Session)
	}
	if res.Usage != (codegen.Usage{PromptTokens: 20, CompletionTokens: 10}) {
		t.Errorf("usage %+v", res.Usage)
	}
}

func TestTaskRepairStops(t *testing.T) {
	tests := []struct {
		name       string
		maxRepairs int
		result     *CodeResult
		// same makes the generator return the same program every time.
		same      bool
		wantExecs int
		wantDiag  string
	}{
		{name: "max_repairs reached", maxRepairs: 2, result: raised("ValueError", "bad"), wantExecs: 3},
		{name: "no repairs configured", maxRepairs: 0, result: raised("ValueError", "bad"), wantExecs: 1},
		{name: "the same program again", maxRepairs: 2, result: raised("ValueError", "bad"), same: true, wantExecs: 1,
			wantDiag: "no generator wrote a different program"},
		{name: "timeout", maxRepairs: 2, result: &CodeResult{ExecResult: sandbox.ExecResult{TimedOut: true,
			Error: &sandbox.ExecError{Type: "Timeout", Message: "30s"}}}, wantExecs: 1},
		{name: "exit status", maxRepairs: 2, result: &CodeResult{ExecResult: sandbox.ExecResult{ExitCode: 3}}, wantExecs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, workspace.Quota{})
			f.tasks.Config.MaxRepairs = tt.maxRepairs
			f.runner.results = []*CodeResult{tt.result}
			n := 0
			f.gen("g", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				n++
				if tt.same {
					n = 1
				}
				return codegen.GenerateResponse{Code: fmt.Sprintf("print(%d)", n)}, nil
			})
			res := f.run(t, "answer")
			if res.Status != TaskFailed || len(f.runner.reqs) != tt.wantExecs || res.Repairs != tt.wantExecs-1 {
				t.Fatalf("status %s, %d executions, %d repairs; want failed, %d", res.Status, len(f.runner.reqs), res.Repairs, tt.wantExecs)
			}
			if res.Exec == nil || res.Attempts[0].Error == "" {
				t.Errorf("the failure should be in the result: %+v", res.Attempts)
			}
			if tt.wantDiag != "" && !strings.Contains(res.Diagnostics.Error(), tt.wantDiag) {
				t.Errorf("diagnostics %v, want %q", res.Diagnostics, tt.wantDiag)
			}
		})
	}
}

func TestTaskDenied(t *testing.T) {
	refused := &CodeResult{ExecResult: sandbox.ExecResult{ExitCode: 1, SandboxOK: true, Error: &sandbox.ExecError{
		Type: TypeDenied, Message: "the code was not run: guard pii: no_writes: writes need a human"}}}
	// A PermissionError raised while the program ran (a refused tool call,
	// a read-only file) is the program's failure: it came from a sandbox.
	raisedInside := raised(TypeDenied, "tool filesystem/write_file is not allowed")
	raisedInside.SandboxID = "sbx-1"
	tests := []struct {
		name       string
		result     *CodeResult
		wantStatus string
		wantExecs  int
	}{
		{name: "refused before running", result: refused, wantStatus: TaskDenied, wantExecs: 1},
		{name: "raised while running", result: raisedInside, wantStatus: TaskFailed, wantExecs: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, workspace.Quota{})
			f.runner.results = []*CodeResult{tt.result}
			n := 0
			f.gen("g", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				n++
				return codegen.GenerateResponse{Code: fmt.Sprintf("write_file(path='%d')", n)}, nil
			})
			res := f.run(t, "go")
			if res.Status != tt.wantStatus || len(f.runner.reqs) != tt.wantExecs {
				t.Fatalf("status %s after %d executions, want %s after %d", res.Status, len(f.runner.reqs), tt.wantStatus, tt.wantExecs)
			}
			if tt.wantStatus != TaskDenied {
				return
			}
			if got := res.Diagnostics.Error(); got != "the guard layer refused the program: the code was not run: guard pii: no_writes: writes need a human" {
				t.Errorf("diagnostics %q", got)
			}
			if !strings.HasPrefix(res.Attempts[0].Error, "denied: the code was not run") || res.Repairs != 0 {
				t.Errorf("attempt %+v", res.Attempts[0])
			}
		})
	}
}

// TestTaskPII runs under a real guard layer: the generators see the task
// tokenized, the executions are model-facing, and the operator gets the
// answer restored while a model-facing caller keeps the tokens.
func TestTaskPII(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: emailGuard{}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	f.tasks.Guard = gr
	// What a model-facing execution returns: the program printed the
	// address, the executor tokenized it.
	f.runner.results = []*CodeResult{{Stdout: []byte("remembered: [EMAIL_1] is Bob's address\n"), Tokenized: true,
		ExecResult: sandbox.ExecResult{SandboxOK: true}}}
	g := f.gen("llm", func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		name := strings.Fields(req.Task)[2]
		return codegen.GenerateResponse{Code: fmt.Sprintf("remember(%q)", name), Usage: codegen.Usage{PromptTokens: 1}}, nil
	})
	for _, modelFacing := range []bool{false, true} {
		t.Run(fmt.Sprintf("model facing %v", modelFacing), func(t *testing.T) {
			res, err := f.tasks.ExecuteTask(context.Background(), TaskRequest{Tenant: "acme", ModelFacing: modelFacing,
				Task: "remember that bob@example.com is Bob's address"})
			if err != nil {
				t.Fatal(err)
			}
			reqs := g.requests()
			if got := reqs[len(reqs)-1].Task; got != "remember that [EMAIL_1] is Bob's address" {
				t.Errorf("the generator saw %q", got)
			}
			run := f.runner.reqs[len(f.runner.reqs)-1]
			if !run.ModelFacing || run.Code != `remember("[EMAIL_1]")` || run.Session != res.Session || run.Task != "remember that [EMAIL_1] is Bob's address" {
				t.Errorf("execution request %+v", run)
			}
			wantOut, wantCode := "remembered: bob@example.com is Bob's address\n", `remember("bob@example.com")`
			if modelFacing {
				wantOut, wantCode = "remembered: [EMAIL_1] is Bob's address\n", `remember("[EMAIL_1]")`
			}
			if string(res.Exec.Stdout) != wantOut || res.Code != wantCode || res.Attempts[0].Code != wantCode {
				t.Errorf("stdout %q, code %q; want %q, %q", res.Exec.Stdout, res.Code, wantOut, wantCode)
			}
			if res.Timings.Guard <= 0 {
				t.Errorf("guard time %s", res.Timings.Guard)
			}
		})
	}
}

func TestTaskNoCode(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.gen("llm", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		return codegen.GenerateResponse{}, errors.New("connection refused")
	})
	f.gen("rules", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		return codegen.GenerateResponse{Diagnostics: pluginapi.Diagnostics{pluginapi.Errorf("", "no rule matches the task", "23 rules tried")}}, nil
	})
	f.tasks.Config.Codegen = append(f.tasks.Config.Codegen, "gone")
	res := f.run(t, "compose a sonnet")
	if res.Status != TaskNoCode || res.Exec != nil || len(f.runner.reqs) != 0 {
		t.Fatalf("status %s", res.Status)
	}
	want := "codegen llm: generate: connection refused; " +
		"codegen rules: wrote no program: no rule matches the task: 23 rules tried; " +
		"codegen gone: plugin codegen.gone is failed (exit status 1): plugin is not running"
	if got := res.Diagnostics.Error(); got != want {
		t.Errorf("diagnostics\n got %q\nwant %q", got, want)
	}
	// llm, rules (selected), rules (fallback), gone.
	if len(res.Attempts) != 4 || !res.Attempts[2].Fallback {
		t.Errorf("attempts %+v", res.Attempts)
	}

	f.tasks.Config.Codegen = nil
	res = f.run(t, "anything")
	if res.Status != TaskNoCode || !strings.Contains(res.Diagnostics.Error(), "no code generator is configured") {
		t.Errorf("without generators: %s %v", res.Status, res.Diagnostics)
	}
}

func TestTaskInputs(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	tenant, err := f.ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.SaveSkill(context.Background(), "weekly_report", "Summarise the week's notes",
		"def run():\n    return 'report'\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tenant.WorkspaceDir(), "notes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tenant.WorkspaceDir(), "notes", "a.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.search.ids = []string{"skills/weekly_report", "fs/read_text_file", "skills/nope", "fs/gone", "fs/write_file", "fs/list_directory"}
	g := f.gen("g", code("print(1)"))
	f.run(t, "write the weekly report")
	req := g.requests()[0]
	if got := ids(req.Tools); !slices.Equal(got, []string{"fs/read_text_file", "fs/write_file"}) {
		t.Errorf("tools %v: want the first SearchLimit tools that exist", got)
	}
	if len(req.Skills) != 1 || req.Skills[0].Name != "weekly_report" || !strings.Contains(req.Skills[0].Source, "def run") {
		t.Errorf("skills %+v", req.Skills)
	}
	for _, want := range []string{"notes/", "notes/a.txt", "skills/weekly_report/__init__.py"} {
		if !slices.Contains(req.WorkspaceListing, want) {
			t.Errorf("workspace listing %v lacks %s", req.WorkspaceListing, want)
		}
	}
	if req.Language != "python" || req.Task != "write the weekly report" || req.Previous != nil {
		t.Errorf("request %+v", req)
	}
	if f.search.limits[0] != 2+maxSkills {
		t.Errorf("search limit %d", f.search.limits[0])
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

func TestTaskErrors(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.gen("g", code("print(1)"))
	for _, tt := range []struct {
		name string
		req  TaskRequest
		want error
	}{
		{name: "empty task", req: TaskRequest{Tenant: "acme", Task: "  "}, want: pluginapi.ErrInvalidArgument},
		{name: "bad tenant", req: TaskRequest{Tenant: "../x", Task: "go"}, want: pluginapi.ErrInvalidArgument},
		{name: "bad session", req: TaskRequest{Tenant: "acme", Session: "../s", Task: "go"}, want: pluginapi.ErrInvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.tasks.ExecuteTask(context.Background(), tt.req); !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("backend down", func(t *testing.T) {
		f.runner.err = errors.New("sandbox backend stopped")
		if _, err := f.tasks.ExecuteTask(context.Background(), TaskRequest{Tenant: "acme", Task: "go"}); err == nil ||
			!strings.Contains(err.Error(), "sandbox backend stopped") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := f.tasks.ExecuteTask(ctx, TaskRequest{Tenant: "acme", Task: "go"}); !errors.Is(err, context.Canceled) {
			t.Errorf("err %v", err)
		}
	})
}

func TestTaskTimings(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.gen("slow", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		time.Sleep(30 * time.Millisecond)
		return codegen.GenerateResponse{Code: "print(1)"}, nil
	})
	res := f.run(t, "go")
	tm := res.Timings
	if tm.Generate < 30*time.Millisecond || tm.Total < tm.Generate+tm.Execute || tm.Overhead() < 0 || tm.Overhead() >= 30*time.Millisecond {
		t.Errorf("timings %+v, overhead %s: the generator's time must not count as overhead", tm, tm.Overhead())
	}
	if res.Attempts[0].Duration < 30*time.Millisecond {
		t.Errorf("attempt duration %s", res.Attempts[0].Duration)
	}
}

func TestTaskConfigFrom(t *testing.T) {
	cfg := &config.Config{
		Pipeline: config.Pipeline{Codegen: []string{"llm", "rules"}, Guards: []string{"pii"}, MaxRepairs: 3, SearchLimit: 5},
		Plugins: []*config.Plugin{
			{Kind: pluginapi.KindCodegen, Name: "llm", Timeout: 3 * time.Minute},
			{Kind: pluginapi.KindCodegen, Name: "rules", Timeout: 10 * time.Second},
			{Kind: pluginapi.KindGuard, Name: "pii", Timeout: time.Second},
		},
	}
	tc := TaskConfigFrom(cfg)
	if !slices.Equal(tc.Codegen, []string{"llm", "rules"}) ||
		tc.MaxRepairs != 3 || tc.SearchLimit != 5 ||
		tc.GenerateTimeouts["llm"] != 3*time.Minute || tc.GenerateTimeouts["rules"] != 10*time.Second || len(tc.GenerateTimeouts) != 2 {
		t.Errorf("%+v", tc)
	}
}
