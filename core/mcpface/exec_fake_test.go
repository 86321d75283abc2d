package mcpface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/internal/testutil/zygotetest"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// zygoteExecutor runs programs in the standard runtime's zygote with the
// stub tree importable, routing call_tool to an upstream client.
type zygoteExecutor struct {
	runner *runtime.Runner
	// up serves call_tool; nil makes every call fail as unavailable.
	up *mcpclient.Client
}

func startExecutor(t testing.TB, stubRoot string, up *mcpclient.Client) *zygoteExecutor {
	t.Helper()
	ws := t.TempDir()
	cfg := runtime.ZygoteConfig{Python: python, Path: []string{stubRoot, ws}, Packages: runtime.StandardPackages(ws, stubRoot), Workdir: ws}
	r := zygotetest.Start(t, cfg, runtime.Options{Timeout: 20 * time.Second, OutputLimit: 1 << 20})
	return &zygoteExecutor{runner: r, up: up}
}

func (e *zygoteExecutor) Execute(ctx context.Context, sc Scope, p Program) (Execution, error) {
	h := newExecHost(e.up)
	res, err := e.runner.Exec(ctx, sandbox.ExecRequest{Code: p.Code, Persistent: p.Persistent, Session: sc.Session}, h)
	if err != nil {
		return Execution{}, err
	}
	ex := Execution{
		Stdout: h.Stdout(), Stderr: h.Stderr(), OutputTruncated: res.OutputTruncated,
		Result: res.Result, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: res.Duration, Calls: h.summary(),
	}
	if res.Error != nil {
		ex.Error = &ExecError{Type: res.Error.Type, Message: res.Error.Message, Traceback: res.Error.Traceback}
	}
	return ex, nil
}

// execHost records one execution's output (plugintest.Host) and answers
// its tool calls from the upstream client, keeping their statistics.
type execHost struct {
	plugintest.Host
	up    *mcpclient.Client
	mu    sync.Mutex
	calls ToolCalls
}

func newExecHost(up *mcpclient.Client) *execHost {
	h := &execHost{up: up}
	h.OnCall = h.handle
	return h
}

func (h *execHost) handle(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if method != "call_tool" {
		return nil, &sandbox.CallError{Type: "HostError", Message: "unknown host call " + method}
	}
	var p struct {
		Server    string         `json:"server"`
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &sandbox.CallError{Type: "HostError", Message: err.Error()}
	}
	start := time.Now()
	out, callErr := h.call(ctx, p.Server, p.Tool, p.Arguments)
	h.record(p.Server, p.Tool, time.Since(start), callErr)
	if callErr != nil {
		return nil, callErr
	}
	return out, nil
}

func (h *execHost) call(ctx context.Context, server, tool string, args map[string]any) (json.RawMessage, error) {
	if h.up == nil || server != "everything" {
		return nil, &sandbox.CallError{Type: "ToolUnavailable", Message: "server " + server + " is not connected in this test"}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := h.up.CallTool(ctx, req)
	if err != nil {
		return nil, &sandbox.CallError{Type: "ToolError", Message: err.Error()}
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return nil, &sandbox.CallError{Type: "ToolError", Message: text.String()}
	}
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	return json.Marshal(text.String())
}

func (h *execHost) record(server, tool string, d time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	msec := float64(d) / float64(time.Millisecond)
	h.calls.Calls++
	h.calls.TotalMS += msec
	i := slices.IndexFunc(h.calls.Tools, func(s ToolStat) bool { return s.Server == server && s.Tool == tool })
	if i < 0 {
		h.calls.Tools = append(h.calls.Tools, ToolStat{Server: server, Tool: tool})
		i = len(h.calls.Tools) - 1
	}
	st := &h.calls.Tools[i]
	st.Calls++
	st.TotalMS += msec
	st.MaxMS = max(st.MaxMS, msec)
	if err != nil {
		h.calls.Failed++
		st.Failed++
		st.LastError = err.Error()
	}
}

func (h *execHost) summary() ToolCalls {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// taskRunner is execute_task with a fixed rule: it writes a program that
// prints the task, runs it, and reports one attempt. It exercises the
// face's handling of task results, not code generation.
type taskRunner struct{ ex Executor }

func (r taskRunner) RunTask(ctx context.Context, sc Scope, task string) (TaskResult, error) {
	code := fmt.Sprintf("print(%q.upper())\n", task)
	ex, err := r.ex.Execute(ctx, sc, Program{Code: code})
	return TaskResult{Code: code, Attempts: 1, Execution: ex}, err
}

// toolCaller is call_tool over the test's upstream, with a deny list in
// place of the tenant's policy (the real path is core/pipeline's CallTool).
type toolCaller struct {
	ex   *zygoteExecutor
	deny []string
}

func (c toolCaller) CallTool(ctx context.Context, _ Scope, server, tool string, args json.RawMessage) (Execution, error) {
	if slices.Contains(c.deny, server+"/"+tool) {
		return Execution{Error: &ExecError{Type: "PermissionError", Message: fmt.Sprintf("tool %s/%s is denied by the tenant's policy", server, tool)}}, nil
	}
	var a map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return Execution{}, err
		}
	}
	out, err := newExecHost(c.ex.up).call(ctx, server, tool, a)
	if ce := (*sandbox.CallError)(nil); errors.As(err, &ce) {
		return Execution{Error: &ExecError{Type: ce.Type, Message: ce.Message}}, nil
	}
	return Execution{Result: out}, err
}
