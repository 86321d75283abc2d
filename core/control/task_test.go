package control

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/pluginapi"
)

type fakeTasks struct {
	res *cexecv1.ExecuteTaskResponse
	err error
	got *cexecv1.ExecuteTaskRequest
}

func (f *fakeTasks) ExecuteTask(_ context.Context, req *cexecv1.ExecuteTaskRequest) (*cexecv1.ExecuteTaskResponse, error) {
	f.got = req
	return f.res, f.err
}

func TestExecuteTask(t *testing.T) {
	answer := &cexecv1.ExecuteTaskResponse{Stdout: "14\n", Status: "ok", Generator: "rules", Code: "print(14)", PipelineOverheadUs: 812}
	tests := []struct {
		name     string
		tasks    *fakeTasks
		req      *cexecv1.ExecuteTaskRequest
		wantCode codes.Code
	}{
		{name: "answered", tasks: &fakeTasks{res: answer}, req: &cexecv1.ExecuteTaskRequest{Task: "what is 2 + 3 * 4", Tenant: "acme", TimeoutMs: 5000}},
		{name: "not wired", req: &cexecv1.ExecuteTaskRequest{Task: "x"}, wantCode: codes.Unimplemented},
		{name: "empty task", tasks: &fakeTasks{res: answer}, req: &cexecv1.ExecuteTaskRequest{Task: " \n"}, wantCode: codes.InvalidArgument},
		{name: "negative timeout", tasks: &fakeTasks{res: answer}, req: &cexecv1.ExecuteTaskRequest{Task: "x", TimeoutMs: -1}, wantCode: codes.InvalidArgument},
		{name: "timeout too long", tasks: &fakeTasks{res: answer}, req: &cexecv1.ExecuteTaskRequest{Task: "x", TimeoutMs: maxTimeout.Milliseconds() + 1}, wantCode: codes.InvalidArgument},
		{name: "backend down", tasks: &fakeTasks{err: fmt.Errorf("execute task: no sandbox backend: %w", pluginapi.ErrUnavailable)},
			req: &cexecv1.ExecuteTaskRequest{Task: "x"}, wantCode: codes.FailedPrecondition},
		{name: "bad tenant", tasks: &fakeTasks{err: fmt.Errorf("tenant id %q: %w", "../x", pluginapi.ErrInvalidArgument)},
			req: &cexecv1.ExecuteTaskRequest{Task: "x", Tenant: "../x"}, wantCode: codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Deps{Plugins: fakePlugins{}, Config: fakeConfig{}}
			if tt.tasks != nil {
				d.Tasks = tt.tasks
			}
			res, err := serve(t, d).ExecuteTask(context.Background(), tt.req)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code %s (%v), want %s", got, err, tt.wantCode)
			}
			if tt.wantCode != codes.OK {
				return
			}
			if res.GetStdout() != "14\n" || res.GetGenerator() != "rules" || res.GetPipelineOverheadUs() != 812 {
				t.Errorf("response %v", res)
			}
			if tt.tasks.got.GetTenant() != "acme" || tt.tasks.got.GetTimeoutMs() != 5000 {
				t.Errorf("request reached the runner as %v", tt.tasks.got)
			}
		})
	}
}
