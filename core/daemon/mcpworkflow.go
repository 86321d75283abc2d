package daemon

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/workflow"
)

// workflowView is the tenant's workflow runs through the face. Inputs and
// signal data may hold tokens the agent was shown; the run gets the real
// values. The face tokenizes what it returns.
type workflowView struct {
	svc     *services
	pii     *sessionVaults
	secrets *secretPages
}

func (v workflowView) untokenize(ctx context.Context, sc mcpface.Scope, raw json.RawMessage) (json.RawMessage, error) {
	if v.pii == nil || len(raw) == 0 {
		return raw, nil
	}
	s, err := v.pii.session(ctx, sc)
	if err != nil {
		return nil, err
	}
	return s.UntokenizeJSON(raw)
}

func (v workflowView) ListWorkflows(_ context.Context, sc mcpface.Scope) ([]mcpface.StoredWorkflow, error) {
	t, err := v.svc.workspace.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	stored, err := t.ListWorkflows()
	if err != nil {
		return nil, err
	}
	var out []mcpface.StoredWorkflow
	for _, s := range stored {
		w, err := t.GetWorkflow(s.Name)
		if err != nil {
			continue
		}
		doc, err := v.svc.loadWorkflow(w.File, w.Source)
		if err != nil {
			// A document that does not load cannot start; the operator
			// sees why with cexecctl workflow validate.
			continue
		}
		out = append(out, mcpface.StoredWorkflow{Name: s.Name, Summary: doc.Summary(), Input: doc.RequiredInput()})
	}
	return out, nil
}

func (v workflowView) StartWorkflow(ctx context.Context, sc mcpface.Scope, name string, input json.RawMessage) (mcpface.WorkflowRun, error) {
	t, err := v.svc.workspace.Tenant(sc.Tenant)
	if err != nil {
		return mcpface.WorkflowRun{}, err
	}
	w, err := t.GetWorkflow(name)
	if err != nil {
		return mcpface.WorkflowRun{}, err
	}
	doc, err := v.svc.loadWorkflow(w.File, w.Source)
	if err != nil {
		return mcpface.WorkflowRun{}, err
	}
	if input, err = v.untokenize(ctx, sc, input); err != nil {
		return mcpface.WorkflowRun{}, err
	}
	st, err := v.svc.workflows.Start(ctx, workflow.StartRequest{Tenant: sc.Tenant, Document: doc, Input: input})
	return faceRun(st), err
}

// runID is the run the agent named: the face tokenizes what it returns,
// and the pii guard takes most run ids for secrets, so the agent may give
// back the token it was shown.
func (v workflowView) runID(ctx context.Context, sc mcpface.Scope, run string) (string, error) {
	if v.pii == nil || !strings.Contains(run, "[") {
		return run, nil
	}
	s, err := v.pii.session(ctx, sc)
	if err != nil {
		return "", err
	}
	return s.Untokenize(run)
}

func (v workflowView) WorkflowStatus(ctx context.Context, sc mcpface.Scope, run string) (mcpface.WorkflowRun, error) {
	run, err := v.runID(ctx, sc, run)
	if err != nil {
		return mcpface.WorkflowRun{}, err
	}
	st, err := v.svc.workflows.Status(ctx, sc.Tenant, run)
	return faceRun(st), err
}

func (v workflowView) SignalWorkflow(ctx context.Context, sc mcpface.Scope, run, event string, data json.RawMessage) (mcpface.WorkflowRun, error) {
	run, err := v.runID(ctx, sc, run)
	if err != nil {
		return mcpface.WorkflowRun{}, err
	}
	data, err = v.untokenize(ctx, sc, data)
	if err != nil {
		return mcpface.WorkflowRun{}, err
	}
	if err := v.svc.workflows.Signal(ctx, sc.Tenant, run, event, data); err != nil {
		return mcpface.WorkflowRun{}, err
	}
	return v.WorkflowStatus(ctx, sc, run)
}

func faceRun(st workflow.Status) mcpface.WorkflowRun {
	out := mcpface.WorkflowRun{Run: st.Run, Workflow: st.Workflow, State: st.State, Task: st.Task, TasksDone: st.TasksDone,
		Output: st.Output, Started: st.Started}
	if st.Error != nil {
		out.Error = st.Error.Error()
	}
	for _, p := range st.Waiting {
		out.Waiting = append(out.Waiting, mcpface.WorkflowWait{Task: p.Task, Events: p.Events, Ask: p.Ask})
	}
	return out
}
