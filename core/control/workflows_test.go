package control

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workflow"
	"github.com/cexec/cexec/core/workspace"
)

// TestWorkflowReadsCreateNoTenant: listing runs and stored workflows, and
// a run's status or logs, of a tenant never used (a mistyped --tenant)
// answer as for an empty tenant (only the shared workflows) or "no tenant",
// and do not create it. The engine is never asked.
func TestWorkflowReadsCreateNoTenant(t *testing.T) {
	shared := t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "approve.yaml"), []byte("document: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := workspace.New(workspace.Options{DataDir: t.TempDir(), Tenants: []*config.Tenant{{ID: "quota"}},
		SharedWorkflowsDir: shared, Logger: hclog.NewNullLogger(), Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	s := &WorkflowServer{d: WorkflowDeps{Workspaces: m, DefaultTenant: endpoint.DefaultTenant}}
	ctx := context.Background()

	runs, err := s.ListWorkflowRuns(ctx, &cexecv1.ListWorkflowRunsRequest{Tenant: "ghost"})
	if err != nil || len(runs.GetRuns()) != 0 {
		t.Errorf("workflow runs of ghost: %v, %v", runs, err)
	}
	stored, err := s.ListWorkflows(ctx, &cexecv1.ListWorkflowsRequest{Tenant: "ghost"})
	if err != nil || len(stored.GetWorkflows()) != 1 || stored.GetWorkflows()[0].GetName() != "approve" || !stored.GetWorkflows()[0].GetShared() {
		t.Errorf("stored workflows of ghost: %v, %v; want the shared one", stored, err)
	}
	_, err = s.GetWorkflowRun(ctx, &cexecv1.WorkflowRunRequest{Tenant: "ghost", Run: "r1"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "no tenant ghost") {
		t.Errorf("status of a run of ghost: %v", err)
	}
	_, err = s.WorkflowLogs(ctx, &cexecv1.WorkflowRunRequest{Tenant: "ghost", Run: "r1"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "no tenant ghost") {
		t.Errorf("logs of a run of ghost: %v", err)
	}
	if m.Exists("ghost") {
		t.Fatal("a workflow read created tenant ghost")
	}
}

// listEngine answers List with runs; the other methods are not called.
type listEngine struct {
	workflow.Engine
	runs []workflow.Status
}

func (e listEngine) List(context.Context, string) ([]workflow.Status, error) { return e.runs, nil }

// TestListWorkflowRunsLeavesOutOutputs: the list of a tenant's runs does
// not carry their outputs. A run's output may be 16 MiB per expression, so
// with them a tenant's list outgrew cexecctl's 4 MiB message limit after
// one large run, and `workflow ls` failed for that tenant from then on.
func TestListWorkflowRunsLeavesOutOutputs(t *testing.T) {
	m, err := workspace.New(workspace.Options{DataDir: t.TempDir(), Tenants: []*config.Tenant{{ID: "acme"}},
		Logger: hclog.NewNullLogger(), Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if _, err := m.Tenant("acme"); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"v":"` + strings.Repeat("x", 5<<20) + `"}`)
	eng := listEngine{runs: []workflow.Status{
		{Run: "r1", Tenant: "acme", Workflow: "qa/big:1", State: "completed", TasksDone: 1, Output: big},
		{Run: "r2", Tenant: "acme", Workflow: "qa/bad:1", State: "failed", Error: &workflow.Error{Type: workflow.ErrRuntime, Status: 500, Title: "boom"}},
	}}
	s := &WorkflowServer{d: WorkflowDeps{Engine: eng, Workspaces: m, DefaultTenant: endpoint.DefaultTenant}}
	out, err := s.ListWorkflowRuns(context.Background(), &cexecv1.ListWorkflowRunsRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.GetRuns()) != 2 {
		t.Fatalf("runs: %v", out.GetRuns())
	}
	if r := out.GetRuns()[0]; r.GetOutputJson() != "" || r.GetRun() != "r1" || r.GetState() != "completed" || r.GetTasksDone() != 1 {
		t.Errorf("listed run r1: state %q, tasks %d, output of %d bytes; want its state and no output", r.GetState(), r.GetTasksDone(), len(r.GetOutputJson()))
	}
	if r := out.GetRuns()[1]; !strings.Contains(r.GetErrorJson(), "boom") {
		t.Errorf("listed run r2: error %q; want the error kept", r.GetErrorJson())
	}
}
