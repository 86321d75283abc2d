package daemon

import (
	"context"
	"fmt"
	"time"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/pipeline"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// execService adapts the executor to the control API's Exec stream.
type execService struct {
	exec *pipeline.Executor
}

// Exec runs the program, streaming output as it comes and the result last.
// Output travels unmasked: the control socket is the operator's (0600), not
// a model's; the MCP face tokenizes what it returns.
func (e execService) Exec(ctx context.Context, req *cexecv1.ExecRequest, send func(*cexecv1.ExecEvent) error) error {
	if e.exec == nil {
		return fmt.Errorf("exec: no sandbox backend is running (see `cexecctl plugins ls`): %w", pluginapi.ErrUnavailable)
	}
	tenant := req.GetTenant()
	if tenant == "" {
		tenant = endpoint.DefaultTenant
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sendErr error
	res, err := e.exec.ExecuteCode(ctx, pipeline.CodeRequest{
		Tenant:       tenant,
		Session:      req.GetSession(),
		Code:         req.GetCode(),
		Timeout:      time.Duration(req.GetTimeoutMs()) * time.Millisecond,
		Persistent:   req.GetPersistent(),
		FreshSandbox: req.GetFreshSandbox(),
		Asker:        operatorOf(ctx),
		Output: func(stream sandbox.Stream, data []byte) {
			if sendErr != nil {
				return
			}
			name := "stdout"
			if stream == sandbox.Stderr {
				name = "stderr"
			}
			// The client went away: stop the program rather than run it
			// for nobody.
			if sendErr = send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Output{Output: &cexecv1.Output{Stream: name, Data: data}}}); sendErr != nil {
				cancel()
			}
		},
	})
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		return err
	}
	return send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Result{Result: resultProto(res)}})
}

func resultProto(r *pipeline.CodeResult) *cexecv1.ExecResult {
	out := &cexecv1.ExecResult{
		ExitCode:        int32(r.ExitCode),
		ResultJson:      r.Result,
		DurationUs:      r.Elapsed.Microseconds(),
		CpuMs:           r.Usage.CPU.Milliseconds(),
		MaxRssBytes:     r.Usage.MaxRSSBytes,
		OutputTruncated: r.OutputTruncated,
		TimedOut:        r.TimedOut,
		SandboxId:       r.SandboxID,
		Session:         r.Session,
		Warm:            r.Warm,
	}
	if r.Error != nil {
		out.Error = &cexecv1.ExecError{Type: r.Error.Type, Message: r.Error.Message, Traceback: r.Error.Traceback}
	}
	if r.QuotaError != nil {
		out.Warnings = append(out.Warnings, r.QuotaError.Error())
	}
	if r.InterpreterLost != "" {
		out.Warnings = append(out.Warnings, r.InterpreterLost)
	}
	for _, a := range r.Attachments {
		out.Attachments = append(out.Attachments, &cexecv1.Attachment{Kind: a.Kind, MimeType: a.MIMEType, Name: a.Name,
			Uri: a.URI, Text: a.Text, Data: a.Data, Path: a.Path, Size: a.Size})
	}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, &cexecv1.ToolCallRecord{
			Server: c.Server, Tool: c.Tool, DurationUs: c.Duration.Microseconds(), Ok: c.OK, Error: c.Error,
		})
	}
	return out
}
