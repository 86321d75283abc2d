package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

// Outcomes of a task (TaskResult.Status).
const (
	// TaskOK: the last program ran to the end without an exception.
	TaskOK = "ok"
	// TaskFailed: the last program failed and no repair was left or
	// possible (a timeout, a killed sandbox, max_repairs reached, or no
	// generator wrote a different program).
	TaskFailed = "failed"
	// TaskNoCode: no generator of the chain wrote a program; Diagnostics
	// say why for each.
	TaskNoCode = "no_code"
	// TaskDenied: the guard layer (the tenant's policy or a guard plugin)
	// refused the program; Diagnostics say why.
	TaskDenied = "denied"
)

// Defaults of TaskConfig.
const (
	DefaultSearchLimit     = 8
	DefaultGenerateTimeout = 30 * time.Second
	// DefaultFallbackCatalog is the catalog size up to which a model-free
	// generator is shown every tool (see Tasks).
	DefaultFallbackCatalog = 100
	// maxListing bounds the workspace listing handed to generators: it is a
	// hint for the prompt, and a workspace may hold millions of files.
	maxListing = 200
	// maxSkills bounds the skills handed to generators.
	maxSkills = 3
)

// CodeRunner runs one program (*Executor).
type CodeRunner interface {
	ExecuteCode(ctx context.Context, req CodeRequest) (*CodeResult, error)
}

// ToolSearch ranks the catalog for a task (core/search over the selector
// plugin).
type ToolSearch interface {
	// SearchTools returns up to limit tool ids ("server/name") and skill
	// ids ("skills/name"), best first, from the given servers only when
	// servers is not empty.
	SearchTools(ctx context.Context, query string, limit int, servers []string) ([]string, error)
}

// ToolCatalog is the tool catalog (*catalog.Catalog).
type ToolCatalog interface {
	Tool(server, name string) (catalog.Tool, bool)
	Tools() []catalog.Tool
	StubSource(id string) ([]byte, bool)
}

// TaskPlugins resolves the configured generators by name
// (*pluginhost.Host). Handles are looked up per task, so a plugin that
// restarted or failed is seen as it is now.
type TaskPlugins interface {
	Codegen(name string) (codegen.Codegen, error)
}

// Tenants opens tenants' workspaces (*workspace.Manager).
type Tenants interface {
	Tenant(id string) (*workspace.Tenant, error)
}

// TaskConfig is the pipeline block of cexec.hcl, resolved.
type TaskConfig struct {
	// Codegen is the generator chain, tried in order.
	Codegen []string
	// MaxRepairs is how many times a program that raised is regenerated
	// with its traceback.
	MaxRepairs int
	// SearchLimit is how many tools the search hands to the generators.
	SearchLimit int
	// GenerateTimeouts bound one Generate call per generator (the plugin
	// block's timeout); missing names get DefaultGenerateTimeout.
	GenerateTimeouts map[string]time.Duration
	// FallbackCatalog is the catalog size up to which a model-free generator
	// that found nothing to do with the selected tools is shown every tool;
	// 0 means DefaultFallbackCatalog.
	FallbackCatalog int
}

// TaskConfigFrom resolves cfg's pipeline block and its generators'
// timeouts.
func TaskConfigFrom(cfg *config.Config) TaskConfig {
	tc := TaskConfig{
		Codegen:          cfg.Pipeline.Codegen,
		MaxRepairs:       cfg.Pipeline.MaxRepairs,
		SearchLimit:      cfg.Pipeline.SearchLimit,
		GenerateTimeouts: map[string]time.Duration{},
	}
	for _, name := range cfg.Pipeline.Codegen {
		if p := cfg.Plugin(pluginapi.KindCodegen, name); p != nil && p.Timeout > 0 {
			tc.GenerateTimeouts[name] = p.Timeout
		}
	}
	return tc
}

// Tasks runs execute_task: search → the codegen chain → guards → execute →
// repair. It is safe for concurrent use; each task is independent.
//
// # Guards and PII
//
// The programs run through the executor's guard layer (Executor.Guard),
// which checks each program against the tenant's policy and the guard
// plugins' CheckCode before it runs; a refusal ends the task as denied,
// without repair. The pipeline does not check the code a second time.
//
// Generators are models, so with Guard set they see what a model sees: the
// task with its PII tokenized ([EMAIL_1]) and the failed program's
// traceback as the executor tokenized it (executions are ModelFacing).
// Tokens in the generated code are restored by the guard layer before the
// code runs. The answer is restored for operator requests (the control
// API) and stays tokenized for ModelFacing ones (the MCP face).
//
// # Which tools a generator sees
//
// Generators get the SearchLimit best tools: for a model, the stubs are the
// prompt, and the point of search is to keep it small. A rule-based
// generator is different: a rule needs exact tool ids, and what it matches
// on is the wording of the task, which a lexical ranking of tool
// descriptions does not see ("remember that Alice works at Acme" ranks no
// memory tool at all, because no memory tool says "remember"). So when a
// generator writes no code without using a model, it is deterministic over
// its input and another call costs no tokens: it is asked once more with
// the fallback scope, which is every tool the tenant may use when the catalog
// has at most FallbackCatalog tools, and otherwise the selected tools plus the
// other tools of their servers, up to FallbackCatalog. Model-based generators
// never see the fallback scope, so search_limit keeps bounding their prompts: a
// generator counts as model-based when its answer reports tokens or names a
// model, or when any earlier answer of it reported tokens.
type Tasks struct {
	Exec    CodeRunner
	Search  ToolSearch
	Catalog ToolCatalog
	Plugins TaskPlugins
	Tenants Tenants
	// Guard is the guard layer the executor runs under (core/guard); nil
	// means no tokenization.
	Guard  Guardrails
	Config TaskConfig
	Log    hclog.Logger

	// usesModel remembers the generators that reported token usage.
	usesModel sync.Map
}

// TaskRequest is one task in words.
type TaskRequest struct {
	Tenant  string
	Session string
	Task    string
	// Timeout bounds each program's run, as CodeRequest.Timeout does (zero:
	// the sandbox's default). Generators have their own deadline.
	Timeout time.Duration
	// ModelFacing says the result goes to a model (the MCP face): its texts
	// stay tokenized. Operator requests leave it false and get them
	// restored.
	ModelFacing bool
}

// Attempt is one call of a generator and what became of its program.
type Attempt struct {
	Generator string
	Model     string
	// Round is 0 for the first program and n for the n-th repair.
	Round int
	// Fallback is set when the generator was shown the fallback scope (the
	// API calls it wide).
	Fallback bool
	// Tools is how many tools the generator was shown.
	Tools int
	// Code is empty when the generator wrote none.
	Code string
	// Error says why the attempt did not answer the task: the generator's
	// failure, why it wrote no code, the guard's denial, or the program's
	// traceback. Empty for the attempt whose program succeeded.
	Error       string
	Diagnostics pluginapi.Diagnostics
	Usage       codegen.Usage
	// Duration is the Generate call.
	Duration time.Duration
}

// TaskTimings split a task's wall-clock time.
type TaskTimings struct {
	Search time.Duration
	// Generate sums the Generate calls (model calls for an LLM).
	Generate time.Duration
	// Guard is the guard layer outside the executions: opening the
	// session's vault, tokenizing the task, restoring the answer. The code
	// checks are part of each execution.
	Guard time.Duration
	// Execute sums the executions, sandbox lease and session log included.
	Execute time.Duration
	Total   time.Duration
}

// Overhead is the pipeline's own time: everything but the generators and
// the executions.
func (t TaskTimings) Overhead() time.Duration {
	return t.Total - t.Generate - t.Execute
}

// TaskResult is the outcome of a task.
type TaskResult struct {
	// Status is one of the Task* constants.
	Status string
	// Code is the program that ran last; Generator and Model wrote it.
	Code      string
	Generator string
	Model     string
	// Usage sums the tokens of every generator call.
	Usage codegen.Usage
	// ToolsDiscovered is the size of the catalog the search ranked;
	// ToolsSelected how many tools the generator of Code was shown (the
	// selection when no program was written).
	ToolsDiscovered int
	ToolsSelected   int
	Attempts        []Attempt
	// Repairs counts the regenerated programs that ran after one raised.
	Repairs int
	// Exec is the last execution; nil when nothing ran.
	Exec *CodeResult
	// Session is the session the executions were logged in.
	Session     string
	Diagnostics pluginapi.Diagnostics
	Timings     TaskTimings
}

// ExecuteTask turns req.Task into a program and runs it. An error means the
// task could not be carried out at all (bad request, sandbox backend down,
// context ended); a task that produced no program, was denied or whose
// program failed is a result with Status saying so.
func (p *Tasks) ExecuteTask(ctx context.Context, req TaskRequest) (*TaskResult, error) {
	start := time.Now()
	if strings.TrimSpace(req.Task) == "" {
		return nil, fmt.Errorf("execute task: the task is empty: %w", pluginapi.ErrInvalidArgument)
	}
	// The session is fixed up front: the task's tokens live in its vault,
	// where the executions find them.
	if req.Session == "" {
		req.Session = workspace.NewSessionID()
	} else if err := workspace.ValidateSessionID(req.Session); err != nil {
		return nil, fmt.Errorf("execute task: %w", err)
	}
	t, err := p.Tenants.Tenant(req.Tenant)
	if err != nil {
		return nil, fmt.Errorf("execute task: %w", err)
	}
	r := &taskRun{p: p, req: req, tenant: t, log: p.log(), task: req.Task, res: &TaskResult{Session: req.Session}}
	if p.Guard != nil {
		gstart := time.Now()
		gs, err := p.Guard.Open(req.Tenant, req.Session)
		if err != nil {
			return nil, fmt.Errorf("execute task: open guard session: %w", err)
		}
		defer func() {
			if err := gs.Close(); err != nil {
				r.log.Warn("close guard session", "tenant", req.Tenant, "session", req.Session, "error", err)
			}
		}()
		r.gs = gs
		if r.task, err = gs.Tokenize(ctx, req.Task); err != nil {
			return nil, fmt.Errorf("execute task: tokenize the task: %w", err)
		}
		r.res.Timings.Guard = time.Since(gstart)
	}
	err = r.run(ctx)
	for _, a := range r.attempts {
		r.res.Attempts = append(r.res.Attempts, *a)
	}
	if err == nil && r.gs != nil && !req.ModelFacing {
		r.restore()
	}
	r.res.Timings.Total = time.Since(start)
	if err != nil {
		return nil, err
	}
	r.log.Debug("task done", "tenant", req.Tenant, "session", r.res.Session, "status", r.res.Status,
		"generator", r.res.Generator, "attempts", len(r.res.Attempts), "repairs", r.res.Repairs,
		"overhead", r.res.Timings.Overhead())
	return r.res, nil
}

func (p *Tasks) log() hclog.Logger {
	if p.Log == nil {
		return hclog.NewNullLogger()
	}
	return p.Log
}

// taskRun is the state of one task.
type taskRun struct {
	p      *Tasks
	req    TaskRequest
	tenant *workspace.Tenant
	log    hclog.Logger
	res    *TaskResult
	// gs is the guard session when there is a guard layer; task is the
	// task as search and the generators see it (tokenized under gs).
	gs   *guard.Session
	task string

	all      []catalog.Tool
	selected []codegen.Tool
	skills   []codegen.Skill
	// fallback is computed on first use; fallbackDone says it was.
	fallback     []codegen.Tool
	fallbackDone bool
	listing      []string
	attempts     []*Attempt
}

func (r *taskRun) run(ctx context.Context) error {
	r.search(ctx)
	r.listing = listWorkspace(r.tenant.WorkspaceDir(), maxListing)
	r.res.ToolsSelected = len(r.selected)

	var prev *codegen.Attempt
	failed := map[string]bool{}
	for round := 0; ; round++ {
		code, att := r.generate(ctx, round, prev, failed)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("execute task: %w", err)
		}
		if att == nil {
			if round == 0 {
				r.res.Status = TaskNoCode
				r.res.Diagnostics = append(r.res.Diagnostics, r.noCode()...)
			} else {
				// Every generator gave up on the repair: the last program's
				// failure stands.
				r.res.Status = TaskFailed
				r.res.Diagnostics = append(r.res.Diagnostics, pluginapi.Errorf("",
					"no generator wrote a different program", "the program of the previous round still fails"))
			}
			return nil
		}
		if round > 0 {
			r.res.Repairs++
		}
		r.res.Code, r.res.Generator, r.res.Model = code, att.Generator, att.Model
		r.res.ToolsSelected = att.Tools
		out, err := r.execute(ctx, code)
		if err != nil {
			att.Error = err.Error()
			return fmt.Errorf("execute task: %w", err)
		}
		r.res.Exec = out
		if denied(out) {
			r.res.Status = TaskDenied
			att.Error = "denied: " + out.Error.Message
			r.res.Diagnostics = append(r.res.Diagnostics, pluginapi.Errorf("", "the guard layer refused the program", out.Error.Message))
			return nil
		}
		if out.Error == nil && !out.TimedOut && out.ExitCode == 0 {
			r.res.Status = TaskOK
			return nil
		}
		att.Error = failure(out)
		r.res.Status = TaskFailed
		if !repairable(out) || round >= r.p.Config.MaxRepairs {
			return nil
		}
		failed[code] = true
		prev = &codegen.Attempt{Code: code, Error: att.Error}
	}
}

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
	// forbidden tools do not take the selection's places.
	var servers []string
	if r.tenant.Quota().AllowedServers != nil {
		if len(all) == 0 {
			return
		}
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
		if name, ok := strings.CutPrefix(id, "skills/"); ok {
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

// generate runs the chain once, in config order, and returns the first
// program that is not one that already failed, with its attempt (nil when
// no generator wrote one).
func (r *taskRun) generate(ctx context.Context, round int, prev *codegen.Attempt, failed map[string]bool) (string, *Attempt) {
	base := codegen.GenerateRequest{
		Task:             r.task,
		Skills:           r.skills,
		Language:         "python",
		Previous:         prev,
		WorkspaceListing: r.listing,
	}
	for _, name := range r.p.Config.Codegen {
		if ctx.Err() != nil {
			return "", nil
		}
		gen, err := r.p.Plugins.Codegen(name)
		if err != nil {
			r.attempt(&Attempt{Generator: name, Round: round, Error: err.Error()})
			continue
		}
		att, answered := r.call(ctx, name, gen, base, round, false)
		if answered && att.Code == "" && r.p.modelFree(name, att) {
			if fb := r.fallbackScope(); len(fb) > len(r.selected) {
				att, _ = r.call(ctx, name, gen, base, round, true)
			}
		}
		if att.Code == "" {
			continue
		}
		if failed[att.Code] {
			att.Error = "wrote the program that already failed"
			continue
		}
		return att.Code, att
	}
	return "", nil
}

// call asks one generator for a program within its deadline and records
// the attempt. answered is false when the call itself failed.
func (r *taskRun) call(ctx context.Context, name string, gen codegen.Codegen, req codegen.GenerateRequest, round int, fallback bool) (att *Attempt, answered bool) {
	req.Tools = r.selected
	if fallback {
		req.Tools = r.fallback
	}
	timeout := r.p.Config.GenerateTimeouts[name]
	if timeout <= 0 {
		timeout = DefaultGenerateTimeout
	}
	gctx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	resp, err := gen.Generate(gctx, req)
	elapsed := time.Since(start)
	cancel()
	r.res.Timings.Generate += elapsed
	att = r.attempt(&Attempt{Generator: name, Round: round, Fallback: fallback, Tools: len(req.Tools), Duration: elapsed})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s (the plugin's timeout): %w", timeout, err)
		}
		att.Error = fmt.Sprintf("generate: %v", err)
		r.log.Warn("generator failed; trying the next", "generator", name, "error", err)
		return att, false
	}
	att.Model, att.Usage, att.Diagnostics, att.Code = resp.Model, resp.Usage, resp.Diagnostics, resp.Code
	if resp.Usage != (codegen.Usage{}) {
		r.p.usesModel.Store(name, true)
	}
	r.res.Usage.PromptTokens += resp.Usage.PromptTokens
	r.res.Usage.CompletionTokens += resp.Usage.CompletionTokens
	if resp.Code == "" {
		att.Error = noCodeReason(resp.Diagnostics)
	}
	return att, true
}

// modelFree says whether a generator that wrote no code is model-free, and
// so may be asked again with the fallback scope: it spent no tokens, named no
// model (an LLM generator names its model even when its request failed;
// the rules generator names a rule only when one wrote code) and has never
// reported token usage.
func (p *Tasks) modelFree(name string, a *Attempt) bool {
	if a.Usage != (codegen.Usage{}) || a.Model != "" {
		return false
	}
	_, uses := p.usesModel.Load(name)
	return !uses
}

// attempt records a; later outcomes (the program's failure) land on it.
func (r *taskRun) attempt(a *Attempt) *Attempt {
	r.attempts = append(r.attempts, a)
	return a
}

// noCode explains, per generator, why the chain wrote no program.
func (r *taskRun) noCode() pluginapi.Diagnostics {
	if len(r.p.Config.Codegen) == 0 {
		return pluginapi.Diagnostics{pluginapi.Errorf("", "no code generator is configured",
			"add a plugin \"codegen\" block (rules works offline) and name it in pipeline.codegen")}
	}
	var out pluginapi.Diagnostics
	for _, a := range r.attempts {
		if a.Error != "" && !(a.Code == "" && !a.Fallback && r.retriedFallback(a)) {
			out = append(out, pluginapi.Errorf("", "codegen "+a.Generator, a.Error))
		}
	}
	return out
}

// retriedFallback reports whether a's generator was asked again, with the fallback scope, in the
// same round: only that answer then explains the outcome.
func (r *taskRun) retriedFallback(a *Attempt) bool {
	for _, b := range r.attempts {
		if b.Fallback && b.Generator == a.Generator && b.Round == a.Round {
			return true
		}
	}
	return false
}

func noCodeReason(d pluginapi.Diagnostics) string {
	if msg := d.Error(); msg != "" {
		return "wrote no program: " + msg
	}
	return "wrote no program"
}

func (r *taskRun) execute(ctx context.Context, code string) (*CodeResult, error) {
	start := time.Now()
	defer func() { r.res.Timings.Execute += time.Since(start) }()
	return r.p.Exec.ExecuteCode(ctx, CodeRequest{
		Tenant:  r.req.Tenant,
		Session: r.res.Session,
		Code:    code,
		Timeout: r.req.Timeout,
		Task:    r.task,
		// The failure goes back to the generators, which are models.
		ModelFacing: true,
	})
}

// denied reports a program the guard layer refused before it ran: such a
// result comes from no sandbox.
func denied(out *CodeResult) bool {
	return out.Error != nil && out.Error.Type == TypeDenied && out.SandboxID == ""
}

// restore puts the real values back into everything the result shows an
// operator: the executions and the generators only saw tokens.
func (r *taskRun) restore() {
	start := time.Now()
	defer func() { r.res.Timings.Guard += time.Since(start) }()
	un := func(s *string) {
		if u, err := r.gs.Untokenize(*s); err == nil {
			*s = u
		}
	}
	un(&r.res.Code)
	for i := range r.res.Attempts {
		un(&r.res.Attempts[i].Code)
		un(&r.res.Attempts[i].Error)
	}
	for i := range r.res.Diagnostics {
		un(&r.res.Diagnostics[i].Detail)
	}
	out := r.res.Exec
	if out == nil || !out.Tokenized {
		return
	}
	for _, b := range []*[]byte{&out.Stdout, &out.Stderr} {
		s := string(*b)
		un(&s)
		*b = []byte(s)
	}
	if e := out.Error; e != nil {
		restored := *e
		un(&restored.Type)
		un(&restored.Message)
		un(&restored.Traceback)
		out.Error = &restored
	}
	if len(out.Result) > 0 {
		if u, err := r.gs.UntokenizeJSON(out.Result); err == nil {
			out.Result = u
		}
	}
	// tokenizeTexts tokenized the names of servers and tools too.
	calls := slices.Clone(out.ToolCalls)
	for i := range calls {
		un(&calls[i].Server)
		un(&calls[i].Tool)
		un(&calls[i].Error)
	}
	out.ToolCalls = calls
	tools := slices.Clone(out.Summary.Tools)
	for i := range tools {
		un(&tools[i].Server)
		un(&tools[i].Tool)
		un(&tools[i].LastError)
	}
	out.Summary.Tools = tools
	out.Tokenized = false
}

// repairable says whether a failed program is worth regenerating: it raised
// an exception. Timeouts, output limits and killed sandboxes are not the
// program's logic going wrong in a way a traceback can explain.
func repairable(out *CodeResult) bool {
	if out.Error == nil || out.TimedOut {
		return false
	}
	switch out.Error.Type {
	case "Timeout", "OutputLimit", "Killed":
		return false
	}
	return true
}

// failure describes a failed program for the attempt and for the repair
// prompt: the traceback, which ends with the exception.
func failure(out *CodeResult) string {
	switch {
	case out.Error != nil && out.Error.Traceback != "":
		return out.Error.Traceback
	case out.Error != nil:
		return out.Error.Type + ": " + out.Error.Message
	case out.TimedOut:
		return "the program timed out"
	}
	return fmt.Sprintf("the program exited with status %d", out.ExitCode)
}

// listWorkspace lists up to max paths under dir, relative to it,
// directories with a trailing slash, in lexical order. Symlinks are listed,
// not followed: sandboxed code may have planted them.
func listWorkspace(dir string, max int) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return nil
		}
		if len(out) >= max {
			return fs.SkipAll
		}
		rel, rerr := filepath.Rel(dir, path)
		if rerr != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	return out
}
