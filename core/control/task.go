package control

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/pluginapi"
)

// TaskRunner carries out execute_task: search, generate, guard, run and
// repair. A task that produced no program, was denied or whose program
// failed is a response saying so (status, diagnostics); an error means the
// task could not be carried out at all.
type TaskRunner interface {
	ExecuteTask(ctx context.Context, req *cexecv1.ExecuteTaskRequest) (*cexecv1.ExecuteTaskResponse, error)
}

// ExecuteTask turns a task in words into a program, runs it and answers
// with what it printed and how it was made.
func (s *Server) ExecuteTask(ctx context.Context, req *cexecv1.ExecuteTaskRequest) (*cexecv1.ExecuteTaskResponse, error) {
	if s.d.Tasks == nil {
		return nil, status.Error(codes.Unimplemented, "execute task: no task pipeline is wired into cexecd")
	}
	if strings.TrimSpace(req.GetTask()) == "" {
		return nil, status.Error(codes.InvalidArgument, "execute task: the task is empty")
	}
	if err := checkTimeout(req.GetTimeoutMs()); err != nil {
		return nil, err
	}
	res, err := s.d.Tasks.ExecuteTask(ctx, req)
	if err != nil {
		s.d.Log.Warn("execute task failed", "tenant", req.GetTenant(), "session", req.GetSession(), "error", err)
		return nil, pluginapi.ToStatus(err)
	}
	s.d.Log.Debug("task executed", "tenant", req.GetTenant(), "status", res.GetStatus(), "generator", res.GetGenerator(),
		"attempts", len(res.GetAttempts()), "overhead_us", res.GetPipelineOverheadUs())
	return res, nil
}
