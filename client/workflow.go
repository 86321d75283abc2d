package client

import (
	"context"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// Workflows calls the daemon's Workflows service: validate documents, start
// runs and follow them, signal, resume and cancel them.
type Workflows struct{ c *Client }

// Workflows returns the workflow calls of c.
func (c *Client) Workflows() Workflows { return Workflows{c} }

func (w Workflows) rpc() cexecv1.WorkflowsClient { return cexecv1.NewWorkflowsClient(w.c.conn) }

// Validate loads a document in the daemon; problems come back as
// diagnostics with lines, not as an error.
func (w Workflows) Validate(ctx context.Context, file string, src []byte) (*cexecv1.ValidateWorkflowResponse, error) {
	r, err := w.rpc().ValidateWorkflow(ctx, &cexecv1.ValidateWorkflowRequest{File: file, Source: src})
	if err != nil {
		return nil, w.c.wrap(ctx, "validate workflow", err)
	}
	return r, nil
}

// Start starts a run of a document (file, src) or of a stored workflow
// (name); input is JSON ("" for none).
func (w Workflows) Start(ctx context.Context, req *cexecv1.StartWorkflowRequest) (*cexecv1.WorkflowRun, error) {
	r, err := w.rpc().StartWorkflow(ctx, req)
	if err != nil {
		return nil, w.c.wrap(ctx, "start workflow", err)
	}
	return r, nil
}

// Get returns a run's status.
func (w Workflows) Get(ctx context.Context, tenant, run string) (*cexecv1.WorkflowRun, error) {
	r, err := w.rpc().GetWorkflowRun(ctx, &cexecv1.WorkflowRunRequest{Tenant: tenant, Run: run})
	if err != nil {
		return nil, w.c.wrap(ctx, "workflow run "+run, err)
	}
	return r, nil
}

// Runs lists a tenant's runs, oldest first.
func (w Workflows) Runs(ctx context.Context, tenant string) ([]*cexecv1.WorkflowRun, error) {
	r, err := w.rpc().ListWorkflowRuns(ctx, &cexecv1.ListWorkflowRunsRequest{Tenant: tenant})
	if err != nil {
		return nil, w.c.wrap(ctx, "list workflow runs", err)
	}
	return r.GetRuns(), nil
}

// Logs returns a run's journal records as JSON.
func (w Workflows) Logs(ctx context.Context, tenant, run string) ([]string, error) {
	r, err := w.rpc().WorkflowLogs(ctx, &cexecv1.WorkflowRunRequest{Tenant: tenant, Run: run})
	if err != nil {
		return nil, w.c.wrap(ctx, "workflow logs "+run, err)
	}
	return r.GetRecordsJson(), nil
}

// Resume continues an interrupted or failed run.
func (w Workflows) Resume(ctx context.Context, tenant, run string) (*cexecv1.WorkflowRun, error) {
	r, err := w.rpc().ResumeWorkflowRun(ctx, &cexecv1.WorkflowRunRequest{Tenant: tenant, Run: run})
	if err != nil {
		return nil, w.c.wrap(ctx, "resume workflow run "+run, err)
	}
	return r, nil
}

// Cancel stops a run.
func (w Workflows) Cancel(ctx context.Context, tenant, run string) (*cexecv1.WorkflowRun, error) {
	r, err := w.rpc().CancelWorkflowRun(ctx, &cexecv1.WorkflowRunRequest{Tenant: tenant, Run: run})
	if err != nil {
		return nil, w.c.wrap(ctx, "cancel workflow run "+run, err)
	}
	return r, nil
}

// Signal answers a run's listen that waits for event; data is JSON.
func (w Workflows) Signal(ctx context.Context, tenant, run, event, data string) (*cexecv1.WorkflowRun, error) {
	r, err := w.rpc().SignalWorkflowRun(ctx, &cexecv1.SignalWorkflowRunRequest{Tenant: tenant, Run: run, Event: event, DataJson: data})
	if err != nil {
		return nil, w.c.wrap(ctx, "signal workflow run "+run, err)
	}
	return r, nil
}

// Stored lists the tenant's and the shared workflow documents.
func (w Workflows) Stored(ctx context.Context, tenant string) ([]*cexecv1.StoredWorkflow, error) {
	r, err := w.rpc().ListWorkflows(ctx, &cexecv1.ListWorkflowsRequest{Tenant: tenant})
	if err != nil {
		return nil, w.c.wrap(ctx, "list workflows", err)
	}
	return r.GetWorkflows(), nil
}

// Save validates a document and stores it as the tenant's workflow name.
func (w Workflows) Save(ctx context.Context, tenant, name string, src []byte) (*cexecv1.StoredWorkflow, error) {
	r, err := w.rpc().SaveWorkflow(ctx, &cexecv1.SaveWorkflowRequest{Tenant: tenant, Name: name, Source: src})
	if err != nil {
		return nil, w.c.wrap(ctx, "save workflow "+name, err)
	}
	return r, nil
}
