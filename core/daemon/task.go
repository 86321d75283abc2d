package daemon

import (
	"context"
	"fmt"
	"time"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/pipeline"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/core/search"
	"github.com/cexec/cexec/pluginapi"
)

// newTasks builds the execute_task pipeline over the executor, search, the
// catalog and the plugins. It is nil when nothing can run (no sandbox
// backend).
func (s *services) newTasks(host *pluginhost.Host) *pipeline.Tasks {
	if s.exec == nil {
		return nil
	}
	t := &pipeline.Tasks{
		Exec:    s.exec,
		Catalog: s.catalog,
		Plugins: host,
		Tenants: s.workspace,
		Config:  pipeline.TaskConfigFrom(s.cfg),
		Log:     s.log.Named("task"),
	}
	if s.search != nil {
		t.Search = toolSearch{s.search}
	}
	if s.guards != nil {
		t.Guard = s.guards
	}
	return t
}

// toolSearch is search_tools as the pipeline asks it: ids only, since the
// pipeline reads stubs from the catalog itself.
type toolSearch struct{ svc *search.Service }

func (t toolSearch) SearchTools(ctx context.Context, query string, limit int, servers []string) ([]string, error) {
	res, err := t.svc.Search(ctx, search.Request{
		Query:   query,
		Detail:  search.DetailName,
		Limit:   min(limit, search.MaxLimit),
		Servers: servers,
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		ids[i] = h.ID
	}
	return ids, nil
}

// taskService adapts the pipeline to the control API's ExecuteTask.
type taskService struct {
	tasks *pipeline.Tasks
}

// ExecuteTask runs the task in the request's tenant (the default one when
// it names none). The answer comes back with its PII restored, as Exec's
// output travels unmasked: the control socket is the operator's. The
// generators only ever see tokens.
func (t taskService) ExecuteTask(ctx context.Context, req *cexecv1.ExecuteTaskRequest) (*cexecv1.ExecuteTaskResponse, error) {
	if t.tasks == nil {
		return nil, fmt.Errorf("execute task: no sandbox backend is running (see `cexecctl plugins ls`): %w", pluginapi.ErrUnavailable)
	}
	tenant := req.GetTenant()
	if tenant == "" {
		tenant = endpoint.DefaultTenant
	}
	res, err := t.tasks.ExecuteTask(ctx, pipeline.TaskRequest{
		Tenant:  tenant,
		Session: req.GetSession(),
		Task:    req.GetTask(),
		Timeout: time.Duration(req.GetTimeoutMs()) * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	return taskProto(res), nil
}

func taskProto(r *pipeline.TaskResult) *cexecv1.ExecuteTaskResponse {
	out := &cexecv1.ExecuteTaskResponse{
		Status:             r.Status,
		Generator:          r.Generator,
		Model:              r.Model,
		Code:               r.Code,
		PromptTokens:       r.Usage.PromptTokens,
		CompletionTokens:   r.Usage.CompletionTokens,
		ToolsDiscovered:    int32(r.ToolsDiscovered),
		ToolsSelected:      int32(r.ToolsSelected),
		Repairs:            int32(r.Repairs),
		PipelineOverheadUs: r.Timings.Overhead().Microseconds(),
		Timings: &cexecv1.TaskTimings{
			SearchUs:   r.Timings.Search.Microseconds(),
			GenerateUs: r.Timings.Generate.Microseconds(),
			GuardUs:    r.Timings.Guard.Microseconds(),
			ExecuteUs:  r.Timings.Execute.Microseconds(),
			TotalUs:    r.Timings.Total.Microseconds(),
		},
	}
	if r.Exec != nil {
		out.Stdout = string(r.Exec.Stdout)
		out.Result = resultProto(r.Exec)
	}
	for _, a := range r.Attempts {
		out.Attempts = append(out.Attempts, &cexecv1.TaskAttempt{
			Generator:        a.Generator,
			Code:             a.Code,
			Error:            a.Error,
			Model:            a.Model,
			Round:            int32(a.Round),
			Tools:            int32(a.Tools),
			Wide:             a.Fallback,
			GenerateUs:       a.Duration.Microseconds(),
			PromptTokens:     a.Usage.PromptTokens,
			CompletionTokens: a.Usage.CompletionTokens,
		})
	}
	for _, d := range r.Diagnostics {
		out.Diagnostics = append(out.Diagnostics, &cexecv1.Diagnostic{Severity: d.Severity.String(), Summary: d.Summary, Detail: d.Detail})
	}
	return out
}
