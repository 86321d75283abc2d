package control

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/workflow"
	"github.com/cexec/cexec/core/workflow/dsl"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
)

// WorkflowDeps are what the Workflows service needs.
type WorkflowDeps struct {
	Engine     workflow.Engine
	Workspaces Workspaces
	// Load loads a document with the daemon's checks (dsl.Load and the
	// configured servers).
	Load          func(file string, src []byte) (*dsl.Document, error)
	DefaultTenant string
}

// WorkflowServer implements cexecv1.WorkflowsServer.
type WorkflowServer struct {
	cexecv1.UnimplementedWorkflowsServer
	d WorkflowDeps
}

// RegisterWorkflows serves the Workflows service on g.
func RegisterWorkflows(g *grpc.Server, d WorkflowDeps) {
	cexecv1.RegisterWorkflowsServer(g, &WorkflowServer{d: d})
}

func (s *WorkflowServer) tenant(id string) (string, error) {
	if id == "" {
		id = s.d.DefaultTenant
	}
	if _, err := s.d.Workspaces.Tenant(id); err != nil {
		return "", pluginapi.ToStatus(err)
	}
	return id, nil
}

// existing resolves a read's tenant as Server.existing does: a tenant
// never used (a mistyped --tenant) answers workspace.ErrNoTenant, as it has
// no runs and only the shared workflows.
func (s *WorkflowServer) existing(id string) (*workspace.Tenant, error) {
	return existingTenant(s.d.Workspaces, s.d.DefaultTenant, id)
}

func workflowStatus(err error) error {
	var ds dsl.Diagnostics
	switch {
	case errors.As(err, &ds):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, workflow.ErrState):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return pluginapi.ToStatus(err)
}

func (s *WorkflowServer) ValidateWorkflow(_ context.Context, req *cexecv1.ValidateWorkflowRequest) (*cexecv1.ValidateWorkflowResponse, error) {
	d, err := s.d.Load(req.GetFile(), req.GetSource())
	var ds dsl.Diagnostics
	if errors.As(err, &ds) {
		out := &cexecv1.ValidateWorkflowResponse{}
		for _, x := range ds {
			out.Diagnostics = append(out.Diagnostics, &cexecv1.WorkflowDiagnostic{File: x.File, Line: int32(x.Line), Column: int32(x.Column), Message: x.Message})
		}
		return out, nil
	}
	if err != nil {
		return nil, workflowStatus(err)
	}
	return &cexecv1.ValidateWorkflowResponse{Name: d.Name()}, nil
}

func (s *WorkflowServer) StartWorkflow(ctx context.Context, req *cexecv1.StartWorkflowRequest) (*cexecv1.WorkflowRun, error) {
	tenant, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	file, src := req.GetFile(), req.GetSource()
	if req.GetName() != "" {
		t, _ := s.d.Workspaces.Tenant(tenant)
		w, err := t.GetWorkflow(req.GetName())
		if err != nil {
			return nil, pluginapi.ToStatus(err)
		}
		file, src = w.File, w.Source
	}
	if len(src) == 0 {
		return nil, status.Error(codes.InvalidArgument, "start a workflow: give a document or the name of a stored one")
	}
	doc, err := s.d.Load(file, src)
	if err != nil {
		return nil, workflowStatus(err)
	}
	st, err := s.d.Engine.Start(ctx, workflow.StartRequest{Tenant: tenant, Document: doc, Input: json.RawMessage(req.GetInputJson())})
	if err != nil {
		return nil, workflowStatus(err)
	}
	return runProto(st), nil
}

func (s *WorkflowServer) GetWorkflowRun(ctx context.Context, req *cexecv1.WorkflowRunRequest) (*cexecv1.WorkflowRun, error) {
	t, err := s.existing(req.GetTenant())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	st, err := s.d.Engine.Status(ctx, t.ID(), req.GetRun())
	if err != nil {
		return nil, workflowStatus(err)
	}
	return runProto(st), nil
}

func (s *WorkflowServer) ListWorkflowRuns(ctx context.Context, req *cexecv1.ListWorkflowRunsRequest) (*cexecv1.ListWorkflowRunsResponse, error) {
	t, err := s.existing(req.GetTenant())
	if errors.Is(err, workspace.ErrNoTenant) {
		return &cexecv1.ListWorkflowRunsResponse{}, nil
	}
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	runs, err := s.d.Engine.List(ctx, t.ID())
	if err != nil {
		return nil, workflowStatus(err)
	}
	out := &cexecv1.ListWorkflowRunsResponse{}
	for _, st := range runs {
		// Outputs stay out: one may be many MiB (16 per expression), and
		// all of a tenant's together outgrew a client's message limit, so
		// the list failed. GetWorkflowRun has a run's output.
		st.Output = nil
		out.Runs = append(out.Runs, runProto(st))
	}
	return out, nil
}

func (s *WorkflowServer) WorkflowLogs(ctx context.Context, req *cexecv1.WorkflowRunRequest) (*cexecv1.WorkflowLogsResponse, error) {
	t, err := s.existing(req.GetTenant())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	tenant := t.ID()
	recs, err := s.d.Engine.Logs(ctx, tenant, req.GetRun())
	if err != nil {
		return nil, workflowStatus(err)
	}
	out := &cexecv1.WorkflowLogsResponse{}
	for _, r := range recs {
		if r.Kind == workflow.KindRun {
			r.Document = "" // the document is long; cexecctl workflow status names it
		}
		b, _ := json.Marshal(r)
		out.RecordsJson = append(out.RecordsJson, string(b))
	}
	return out, nil
}

func (s *WorkflowServer) ResumeWorkflowRun(ctx context.Context, req *cexecv1.WorkflowRunRequest) (*cexecv1.WorkflowRun, error) {
	tenant, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	st, err := s.d.Engine.Resume(ctx, tenant, req.GetRun())
	if err != nil {
		return nil, workflowStatus(err)
	}
	return runProto(st), nil
}

func (s *WorkflowServer) CancelWorkflowRun(ctx context.Context, req *cexecv1.WorkflowRunRequest) (*cexecv1.WorkflowRun, error) {
	tenant, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	if err := s.d.Engine.Cancel(ctx, tenant, req.GetRun()); err != nil {
		return nil, workflowStatus(err)
	}
	return s.GetWorkflowRun(ctx, req)
}

func (s *WorkflowServer) SignalWorkflowRun(ctx context.Context, req *cexecv1.SignalWorkflowRunRequest) (*cexecv1.WorkflowRun, error) {
	tenant, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	if req.GetEvent() == "" {
		return nil, status.Error(codes.InvalidArgument, "signal: name the event the run waits for")
	}
	if err := s.d.Engine.Signal(ctx, tenant, req.GetRun(), req.GetEvent(), json.RawMessage(req.GetDataJson())); err != nil {
		return nil, workflowStatus(err)
	}
	return s.GetWorkflowRun(ctx, &cexecv1.WorkflowRunRequest{Tenant: tenant, Run: req.GetRun()})
}

func (s *WorkflowServer) ListWorkflows(_ context.Context, req *cexecv1.ListWorkflowsRequest) (*cexecv1.ListWorkflowsResponse, error) {
	t, err := s.existing(req.GetTenant())
	ws := s.d.Workspaces.SharedWorkflows()
	switch {
	case errors.Is(err, workspace.ErrNoTenant):
	case err != nil:
		return nil, pluginapi.ToStatus(err)
	default:
		if ws, err = t.ListWorkflows(); err != nil {
			return nil, pluginapi.ToStatus(err)
		}
	}
	out := &cexecv1.ListWorkflowsResponse{}
	for _, w := range ws {
		out.Workflows = append(out.Workflows, &cexecv1.StoredWorkflow{Name: w.Name, Shared: w.Shared, File: w.File})
	}
	return out, nil
}

func (s *WorkflowServer) SaveWorkflow(_ context.Context, req *cexecv1.SaveWorkflowRequest) (*cexecv1.StoredWorkflow, error) {
	tenant, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	if _, err := s.d.Load(req.GetName()+".yaml", req.GetSource()); err != nil {
		return nil, workflowStatus(err)
	}
	t, _ := s.d.Workspaces.Tenant(tenant)
	w, err := t.SaveWorkflow(req.GetName(), req.GetSource())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &cexecv1.StoredWorkflow{Name: w.Name, File: w.File}, nil
}

func runProto(st workflow.Status) *cexecv1.WorkflowRun {
	out := &cexecv1.WorkflowRun{Run: st.Run, Tenant: st.Tenant, Workflow: st.Workflow, State: st.State,
		StartedUnixMs: st.Started.UnixMilli(), Task: st.Task, TasksDone: int32(st.TasksDone), OutputJson: strings.TrimSpace(string(st.Output))}
	if st.Ended != nil {
		out.EndedUnixMs = st.Ended.UnixMilli()
	}
	if st.Error != nil {
		b, _ := json.Marshal(st.Error)
		out.ErrorJson = string(b)
	}
	for _, p := range st.Waiting {
		out.Waiting = append(out.Waiting, &cexecv1.WorkflowPending{Path: p.Path, Task: p.Task, Events: p.Events, SinceUnixMs: p.Since.UnixMilli()})
	}
	return out
}
