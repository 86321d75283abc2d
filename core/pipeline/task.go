package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/telemetry"
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
// task with its PII tokenized ([EMAIL_1]), and so the workspace listing,
// the skills and the tools' texts (tokenizeRequest), and the failed
// program's traceback as the executor tokenized it (executions are
// ModelFacing); a request that cannot be checked is not sent.
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
	// Asker is as CodeRequest's, for every program of the task.
	Asker Asker
	// Progress, when set, receives the programs' progress reports, as
	// CodeRequest.Progress does, increasing across repairs.
	Progress func(Progress)
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
	ctx, span := telemetry.StartExecution(ctx, "execute_task", req.Tenant, req.Session)
	defer span.End()
	t, err := p.Tenants.Tenant(req.Tenant)
	if err != nil {
		return nil, fmt.Errorf("execute task: %w", err)
	}
	req.Progress = acrossAttempts(req.Progress)
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
