package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cexec/cexec/core/pipeline"
	"github.com/cexec/cexec/core/workflow"
	"github.com/cexec/cexec/core/workflow/dsl"
	"github.com/cexec/cexec/pluginapi"
)

// defaultWorkflowRuns bounds a tenant's concurrent workflow runs when its
// block sets no max_concurrent.
const defaultWorkflowRuns = 4

// sharedWorkflowsDir is the repository's workflows/ folder, beside the
// shared skills.
func sharedWorkflowsDir(skillsDir string) string {
	d := filepath.Join(filepath.Dir(skillsDir), "workflows")
	if fi, err := os.Stat(d); err == nil && fi.IsDir() {
		return d
	}
	return ""
}

// startWorkflows builds the embedded workflow engine over the executor and
// resumes the runs cexecd was running when it stopped.
func (s *services) startWorkflows(ctx context.Context) {
	// Replicas forward a signal or cancel to the replica that runs the run,
	// and resume here, too, the runs of a replica that went: its hold on
	// them ended with it, and they would wait for `workflow resume` or the
	// next start of a replica.
	var fwd *runForwarder
	var forward func(context.Context, workflow.Forwarded) error
	gone := make(chan string, 1)
	if s.store != nil {
		fwd = newRunForwarder(s.store, s.log.Named("workflow"))
		forward = fwd.forward
		s.store.OnReplicaGone(func(id string) {
			select {
			case gone <- id:
			default: // a pass is due anyway and takes every free run
			}
		})
	}
	s.workflows = workflow.NewEmbedded(workflow.Options{
		Journals: s.workspace,
		Effects:  workflowEffects{svc: s},
		Limit: func(tenant string) int {
			if t, err := s.workspace.Tenant(tenant); err == nil && t.Quota().MaxConcurrent > 0 {
				return t.Quota().MaxConcurrent
			}
			return defaultWorkflowRuns
		},
		OnWaiting: func(tenant, run string, p workflow.Pending) {
			s.log.Named("workflow").Info("workflow run waits for a signal", "tenant", tenant, "run", run, "task", p.Task, "events", p.Events)
		},
		Forward: forward,
		Log:     s.log.Named("workflow"),
	})
	if fwd != nil {
		fwd.serve(s.workflows)
	}
	// The passes end before the engine closes (closeWorkflows): a run
	// launched on a closed engine would be ended as cancelled.
	ctx, s.stopResumes = context.WithCancel(ctx)
	s.resumesDone = make(chan struct{})
	go func() {
		defer close(s.resumesDone)
		for {
			n, err := s.workflows.ResumeAll(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("resume workflow runs", "error", err)
			}
			if n > 0 {
				s.log.Info("resumed workflow runs", "runs", n)
			}
			select {
			case <-ctx.Done():
				return
			case id := <-gone:
				s.log.Info("a replica went; resuming the workflow runs it held", "replica", id)
			}
		}
	}()
}

// loadWorkflow loads a document with the daemon's checks: every call: mcp
// names a configured server.
func (s *services) loadWorkflow(file string, src []byte) (*dsl.Document, error) {
	return dsl.LoadWith(file, src, dsl.Options{Server: func(name string) bool {
		_, ok := s.catalog.Server(name)
		return ok
	}})
}

// workflowEffects runs workflow tasks on the path programs take: tool
// calls through pipeline.Executor.CallTool (allowed servers, policy, guard
// plugins, PII tokens restored, schema validation, limits, session log),
// resources/read and prompts/get through ReadResource and GetPrompt (the
// guards seeing them as tools read_resource and get_prompt), scripts
// through ExecuteCode in the tenant's sandbox.
type workflowEffects struct{ svc *services }

func (w workflowEffects) exec() (*pipeline.Executor, error) {
	if w.svc.exec == nil {
		return nil, fmt.Errorf("no sandbox backend is running (see `cexecctl plugins ls`): %w", pluginapi.ErrUnavailable)
	}
	return w.svc.exec, nil
}

func (w workflowEffects) CallMCP(ctx context.Context, c workflow.MCPCall) (any, error) {
	switch c.Method {
	case "tools/call":
		x, err := w.exec()
		if err != nil {
			return nil, err
		}
		name, _ := c.Params["name"].(string)
		args, err := json.Marshal(c.Params["arguments"])
		if err != nil {
			return nil, err
		}
		if string(args) == "null" {
			args = nil
		}
		res, err := x.CallTool(ctx, pipeline.ToolCallRequest{Tenant: c.Tenant, Session: c.Session, Server: c.Server, Tool: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, &workflow.Error{Type: workflow.ErrCommunication, Status: 502, Title: res.Error.Type, Detail: res.Error.Message}
		}
		return decodeValue(res.Result), nil
	case "resources/read":
		x, err := w.exec()
		if err != nil {
			return nil, err
		}
		uri, _ := c.Params["uri"].(string)
		res, err := x.ReadResource(ctx, pipeline.ResourceReadRequest{Tenant: c.Tenant, Session: c.Session, Server: c.Server, URI: uri})
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, &workflow.Error{Type: workflow.ErrCommunication, Status: 502, Title: res.Error.Type, Detail: res.Error.Message}
		}
		return map[string]any{"contents": decodeValue(res.Result)}, nil
	case "prompts/get":
		x, err := w.exec()
		if err != nil {
			return nil, err
		}
		name, _ := c.Params["name"].(string)
		args := map[string]string{}
		if a, ok := c.Params["arguments"].(map[string]any); ok {
			for k, v := range a {
				args[k] = fmt.Sprint(v)
			}
		}
		res, err := x.GetPrompt(ctx, pipeline.PromptGetRequest{Tenant: c.Tenant, Session: c.Session, Server: c.Server, Name: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, &workflow.Error{Type: workflow.ErrCommunication, Status: 502, Title: res.Error.Type, Detail: res.Error.Message}
		}
		return decodeValue(res.Result), nil
	}
	return nil, &workflow.Error{Type: workflow.ErrConfiguration, Status: 400, Detail: fmt.Sprintf("method %q is not supported", c.Method)}
}

func decodeValue(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

// scriptPrelude hands a run: script task its arguments as globals (and as
// args) and result() to return its value.
const scriptPrelude = "import json as _cexec_json\nfrom cexec import result\nargs = _cexec_json.loads(%s)\nglobals().update(args)\n"

func (w workflowEffects) RunScript(ctx context.Context, s workflow.Script) (any, error) {
	x, err := w.exec()
	if err != nil {
		return nil, err
	}
	args, err := json.Marshal(s.Arguments)
	if err != nil {
		return nil, err
	}
	lit, _ := json.Marshal(string(args))
	res, err := x.ExecuteCode(ctx, pipeline.CodeRequest{Tenant: s.Tenant, Session: s.Session,
		Code: fmt.Sprintf(scriptPrelude, lit) + s.Code})
	if err != nil {
		return nil, err
	}
	if res.Error != nil || res.ExitCode != 0 {
		we := &workflow.Error{Type: workflow.ErrRuntime, Status: 500, Title: "script failed", Detail: fmt.Sprintf("exit code %d", res.ExitCode)}
		if res.Error != nil {
			we.Title, we.Detail = res.Error.Type, strings.TrimSpace(res.Error.Message+"\n"+res.Error.Traceback)
		}
		return nil, we
	}
	if len(res.Result) > 0 {
		return decodeValue(res.Result), nil
	}
	if out := strings.TrimSpace(string(res.Stdout)); out != "" {
		return decodeValue(json.RawMessage(out)), nil
	}
	return nil, nil
}
