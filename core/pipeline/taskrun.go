package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

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

// execute runs one generated program in the task's session.
func (r *taskRun) execute(ctx context.Context, code string) (*CodeResult, error) {
	start := time.Now()
	defer func() { r.res.Timings.Execute += time.Since(start) }()
	return r.p.Exec.ExecuteCode(ctx, CodeRequest{
		Tenant:  r.req.Tenant,
		Session: r.res.Session,
		Code:    code,
		Timeout: r.req.Timeout,
		Task:    r.task,
		Asker:   r.req.Asker,
		// The failure goes back to the generators, which are models.
		ModelFacing: true,
		Progress:    r.req.Progress,
	})
}

// denied reports a program the guard layer refused before it ran: such a
// result comes from no sandbox.
func denied(out *CodeResult) bool {
	return out.Error != nil && out.Error.Type == TypeDenied && out.SandboxID == ""
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
