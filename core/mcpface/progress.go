package mcpface

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
)

// Progress is one progress report of a running execute_code: Progress
// increases from report to report, Total is 0 when unknown, and Message is
// in its model-facing form (PII tokenized), as the executor words it.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

type progressKey struct{}

// ProgressFunc returns where the Executor (the ToolCaller, the TaskRunner)
// sends progress reports for the execute_code (call_tool, execute_task)
// request ctx belongs to, or nil when the client asked for none (it gave
// no progress token). The func may be called from any
// goroutine until Execute returns, never after.
func ProgressFunc(ctx context.Context) func(Progress) {
	fn, _ := ctx.Value(progressKey{}).(func(Progress))
	return fn
}

// withProgress sets up ProgressFunc for a tool call whose client gave a
// progress token: each report becomes a notifications/progress to the
// client's session.
func (f *Face) withProgress(ctx context.Context, req mcp.CallToolRequest) context.Context {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return ctx
	}
	token := req.Params.Meta.ProgressToken
	return context.WithValue(ctx, progressKey{}, func(p Progress) {
		params := map[string]any{"progressToken": token, "progress": p.Progress}
		if p.Total > 0 {
			params["total"] = p.Total
		}
		if p.Message != "" {
			params["message"] = p.Message
		}
		if err := f.srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), params); err != nil {
			// A full channel drops this report; the next one says more.
			f.log.Debug("progress notification not sent", "error", err)
		}
	})
}
