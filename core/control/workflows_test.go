package control

import (
	"context"
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
