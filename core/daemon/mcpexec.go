package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/pipeline"
	"github.com/cexec/cexec/pluginapi"
)

// mcpExecutor is execute_code: MCP sessions are cexec sessions, and the
// pipeline's guard layer restores PII tokens in the code and in tool-call
// arguments and vets both against the tenant's policy and the guards.
type mcpExecutor struct {
	exec *pipeline.Executor
	// pii is nil without guardrails.
	pii     *sessionVaults
	adopter *sessionAdopter
}

// Execute runs code for sc.
func (e mcpExecutor) Execute(ctx context.Context, sc mcpface.Scope, p mcpface.Program) (mcpface.Execution, error) {
	if e.exec == nil {
		return mcpface.Execution{}, fmt.Errorf("no sandbox backend is running; the operator can check `cexecctl plugins ls`: %w", pluginapi.ErrUnavailable)
	}
	res, err := e.exec.ExecuteCode(ctx, pipeline.CodeRequest{Tenant: sc.Tenant, Session: sc.Session,
		Vault: vaultSession(ctx, sc, e.adopter), Code: p.Code, Persistent: p.Persistent, ModelFacing: true,
		Progress: progressTo(mcpface.ProgressFunc(ctx)), Asker: askerOf(ctx)})
	if err != nil {
		return mcpface.Execution{}, err
	}
	return faceExecution(res), nil
}

// CallTool is call_tool: one call through the pipeline, which guards,
// validates, logs and tokenizes it as a program's.
func (e mcpExecutor) CallTool(ctx context.Context, sc mcpface.Scope, server, tool string, args json.RawMessage) (mcpface.Execution, error) {
	if e.exec == nil {
		return mcpface.Execution{}, fmt.Errorf("no sandbox backend is running; the operator can check `cexecctl plugins ls`: %w", pluginapi.ErrUnavailable)
	}
	res, err := e.exec.CallTool(ctx, pipeline.ToolCallRequest{Tenant: sc.Tenant, Session: sc.Session,
		Vault: vaultSession(ctx, sc, e.adopter), Server: server, Tool: tool, Arguments: args, ModelFacing: true,
		Progress: progressTo(mcpface.ProgressFunc(ctx)), Asker: askerOf(ctx)})
	if err != nil {
		return mcpface.Execution{}, err
	}
	return faceExecution(res), nil
}

// taskView is execute_task: the pipeline searches, generates, guards,
// runs and repairs in the MCP session's cexec session. Generators only see
// the task tokenized; the result comes back restored and the face
// tokenizes it once, as everything else it returns.
type taskView struct{ tasks *pipeline.Tasks }

// RunTask turns task into a program and runs it.
func (t taskView) RunTask(ctx context.Context, sc mcpface.Scope, task string) (mcpface.TaskResult, error) {
	res, err := t.tasks.ExecuteTask(ctx, pipeline.TaskRequest{Tenant: sc.Tenant, Session: sc.Session, Task: task,
		Progress: progressTo(mcpface.ProgressFunc(ctx)), Asker: askerOf(ctx)})
	if err != nil {
		return mcpface.TaskResult{}, err
	}
	out := mcpface.TaskResult{Code: res.Code}
	var why []string
	for _, a := range res.Attempts {
		if a.Code != "" {
			out.Attempts++
		}
		if a.Error != "" {
			why = append(why, a.Generator+": "+a.Error)
		}
	}
	if res.Exec == nil {
		// The diagnostics already say what each generator answered (a
		// refusal says what it can do); the attempts would repeat it.
		if len(res.Diagnostics) > 0 {
			why = why[:0]
		}
		for _, d := range res.Diagnostics {
			why = append(why, strings.TrimSpace(d.Summary+": "+d.Detail))
		}
		if len(why) == 0 {
			why = append(why, "no code generator wrote a program")
		}
		msg := strings.Join(why, "; ") + "; write the program with execute_code instead"
		if res.Status == pipeline.TaskDenied {
			return mcpface.TaskResult{}, noProgram{"no program ran (denied): " + msg, pluginapi.ErrDenied}
		}
		return mcpface.TaskResult{}, noProgram{msg, pluginapi.ErrInvalidArgument}
	}
	out.Execution = faceExecution(res.Exec)
	return out, nil
}

func faceExecution(res *pipeline.CodeResult) mcpface.Execution {
	ex := mcpface.Execution{
		Stdout:          string(res.Stdout),
		Stderr:          string(res.Stderr),
		OutputTruncated: res.OutputTruncated,
		Result:          res.Result,
		ExitCode:        res.ExitCode,
		TimedOut:        res.TimedOut,
		Duration:        res.Elapsed,
		Tokenized:       res.Tokenized,
		Calls: mcpface.ToolCalls{
			Calls:   res.Summary.Calls,
			Failed:  res.Summary.Failed,
			Refused: res.Summary.Refused,
			TotalMS: res.Summary.TotalMS,
		},
	}
	if res.Error != nil {
		ex.Error = &mcpface.ExecError{Type: res.Error.Type, Message: res.Error.Message, Traceback: res.Error.Traceback}
	}
	for _, t := range res.Summary.Tools {
		ex.Calls.Tools = append(ex.Calls.Tools, mcpface.ToolStat{Server: t.Server, Tool: t.Tool, Calls: t.Calls,
			Failed: t.Failed, TotalMS: t.TotalMS, MaxMS: t.MaxMS, LastError: t.LastError})
	}
	for _, a := range res.Attachments {
		ex.Attachments = append(ex.Attachments, mcpface.Attachment{Kind: a.Kind, MIMEType: a.MIMEType, Name: a.Name,
			URI: a.URI, Text: a.Text, Data: a.Data, Path: a.Path, Size: a.Size})
	}
	if res.InterpreterLost != "" {
		ex.Warnings = append(ex.Warnings, res.InterpreterLost)
	}
	if res.QuotaError != nil {
		// The program ran; the agent should know its workspace is full.
		ex.Stderr += fmt.Sprintf("\ncexec: %v; delete files under /workspace", res.QuotaError)
	}
	return ex
}

// noProgram is why a task ran no program, read by a model: its text leaves
// out the sentinel it wraps.
type noProgram struct {
	msg  string
	kind error
}

func (e noProgram) Error() string { return e.msg }
func (e noProgram) Unwrap() error { return e.kind }
