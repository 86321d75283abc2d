package mcpface

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
)

// heldExecutor is an Executor whose programs report progress, then wait
// for release or for their context to end, which it reports.
type heldExecutor struct {
	Executor
	started, ended chan error
	release        chan struct{}
}

func newHeldExecutor() *heldExecutor {
	return &heldExecutor{started: make(chan error, 4), ended: make(chan error, 4), release: make(chan struct{})}
}

func (e *heldExecutor) Execute(ctx context.Context, _ Scope, prog Program) (Execution, error) {
	code := prog.Code
	if p := ProgressFunc(ctx); p != nil {
		p(Progress{Progress: 1, Total: 2, Message: "half of " + code})
	}
	e.started <- nil
	select {
	case <-e.release:
		e.ended <- nil
		return Execution{Stdout: "ran " + code}, nil
	case <-ctx.Done():
		e.ended <- ctx.Err()
		return Execution{}, ctx.Err()
	}
}

// within waits for a value of ch; the limit only keeps a broken run from
// hanging.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

// callAsTask sends execute_code as a task-augmented tools/call and returns
// the task.
func callAsTask(t *testing.T, c *mcpclient.Client, code string) mcp.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(900)),
		Method: string(mcp.MethodToolsCall), Params: map[string]any{
			"name": ToolExecuteCode, "arguments": map[string]any{"code": code}, "task": map[string]any{"ttl": 2 * TaskTTL.Milliseconds()}}})
	if err != nil || res.Error != nil {
		t.Fatalf("task-augmented tools/call: %v %+v", err, res)
	}
	var created mcp.CreateTaskResult
	if err := json.Unmarshal(res.Result, &created); err != nil || created.Task.TaskId == "" {
		t.Fatalf("not a CreateTaskResult: %v %s", err, res.Result)
	}
	if created.Task.Status != mcp.TaskStatusWorking {
		t.Errorf("created task is %s, want working", created.Task.Status)
	}
	if created.Task.TTL == nil || *created.Task.TTL != TaskTTL.Milliseconds() {
		t.Errorf("task ttl %v, want the face's cap %d", created.Task.TTL, TaskTTL.Milliseconds())
	}
	return created.Task
}

func TestExecuteCodeTask(t *testing.T) {
	ex := newHeldExecutor()
	w := newWorld(t, func(o *Options, _ *world) { o.Executor = ex })
	c := connect(t, w.url+endpoint.MCPPath)
	ctx := context.Background()

	task := callAsTask(t, c, "print(1)")
	within(t, ex.started, "the program to start")
	// The CreateTaskResult is out and its request over: the run goes on.
	got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}})
	if err != nil || got.Status != mcp.TaskStatusWorking {
		t.Fatalf("tasks/get: %+v %v, want working", got, err)
	}
	close(ex.release)
	if err := within(t, ex.ended, "the program to end"); err != nil {
		t.Fatalf("the task's program ended with %v, not released", err)
	}
	res, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	raw, _ := json.Marshal(res)
	if !strings.Contains(string(raw), "ran print(1)") {
		t.Errorf("tasks/result = %s, want the program's output", raw)
	}
	got, err = c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}})
	if err != nil || got.Status != mcp.TaskStatusCompleted {
		t.Errorf("tasks/get after the end: %+v %v, want completed", got, err)
	}
}

func TestExecuteCodeTaskCancel(t *testing.T) {
	ex := newHeldExecutor()
	w := newWorld(t, func(o *Options, _ *world) { o.Executor = ex })
	c := connect(t, w.url+endpoint.MCPPath)

	task := callAsTask(t, c, "import time; time.sleep(600)")
	within(t, ex.started, "the program to start")
	if _, err := c.CancelTask(context.Background(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}}); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	if err := within(t, ex.ended, "the cancelled program to end"); err == nil {
		t.Error("the program ran to its end after tasks/cancel")
	}
}

// ctxTokenizer fails, as the real vault's calls do, once the request's
// context has ended.
type ctxTokenizer struct{ *emailTokenizer }

func (z ctxTokenizer) Tokenize(ctx context.Context, sc Scope, text string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("detect: %w", err)
	}
	return z.emailTokenizer.Tokenize(ctx, sc, text)
}

// syncBuffer is a log the handler goroutines write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestCancelledCallLogs: a call the client cancels is no tokenizer failure,
// though the tokenizer's call ends with it: the daemon log must not say
// "pii tokenizer failed" at ERROR for an agent's normal abort.
func TestCancelledCallLogs(t *testing.T) {
	tests := []struct {
		name   string
		cancel func(t *testing.T, c *mcpclient.Client, ex *heldExecutor)
	}{
		{"request cancelled", func(t *testing.T, c *mcpclient.Client, ex *heldExecutor) {
			ctx, cancel := context.WithCancel(context.Background())
			req := mcp.CallToolRequest{}
			req.Params.Name = ToolExecuteCode
			req.Params.Arguments = map[string]any{"code": "import time; time.sleep(600)"}
			go func() { _, _ = c.CallTool(ctx, req) }()
			within(t, ex.started, "the program to start")
			cancel()
		}},
		{"task cancelled", func(t *testing.T, c *mcpclient.Client, ex *heldExecutor) {
			task := callAsTask(t, c, "import time; time.sleep(600)")
			within(t, ex.started, "the program to start")
			if _, err := c.CancelTask(context.Background(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}}); err != nil {
				t.Fatalf("tasks/cancel: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := newHeldExecutor()
			var log syncBuffer
			w := newWorld(t, func(o *Options, w *world) {
				o.Executor = ex
				o.PII = ctxTokenizer{w.pii}
				o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &log})
			})
			c := connect(t, w.url+endpoint.MCPPath)
			tt.cancel(t, c, ex)
			if err := within(t, ex.ended, "the cancelled program to end"); err == nil {
				t.Fatal("the program ran to its end after the cancel")
			}
			// The handler tokenizes after the program ended: wait for its
			// log line, either one.
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(log.String(), "was not tokenized") && !strings.Contains(log.String(), "tokenizer failed") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := log.String(); strings.Contains(got, "[ERROR]") || !strings.Contains(got, "[DEBUG] request cancelled; its output was not tokenized") {
				t.Errorf("log of a cancelled call:\n%s", got)
			}
		})
	}
}

func TestExecuteCodeTaskEndsWithSession(t *testing.T) {
	ex := newHeldExecutor()
	w := newWorld(t, func(o *Options, _ *world) { o.Executor = ex })
	c := connect(t, w.url+endpoint.MCPPath)

	callAsTask(t, c, "import time; time.sleep(600)")
	within(t, ex.started, "the program to start")
	// Close sends DELETE: nobody can ask for the result any more.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := within(t, ex.ended, "the program of the ended session to end"); err == nil {
		t.Error("the program ran to its end after its session ended")
	}
}

// tickingExecutor's programs report progress every few milliseconds until
// released.
type tickingExecutor struct {
	Executor
	release chan struct{}
}

func (e *tickingExecutor) Execute(ctx context.Context, _ Scope, prog Program) (Execution, error) {
	code := prog.Code
	p := ProgressFunc(ctx)
	for i := 1; ; i++ {
		if p != nil {
			p(Progress{Progress: float64(i), Total: 1000, Message: "tick of " + code})
		}
		select {
		case <-e.release:
			return Execution{Stdout: "ran " + code}, nil
		case <-ctx.Done():
			return Execution{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestExecuteCodeProgress(t *testing.T) {
	ex := &tickingExecutor{}
	w := newWorld(t, func(o *Options, _ *world) { o.Executor = ex })
	c := connect(t, w.url+endpoint.MCPPath)
	notes := make(chan mcp.JSONRPCNotification, 1024)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			notes <- n
		}
	})
	for _, tc := range []struct {
		name  string
		token mcp.ProgressToken
	}{
		{"no token", nil},
		{"string token", "tok-1"},
		{"number token", float64(7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex.release = make(chan struct{})
			req := mcp.CallToolRequest{}
			req.Params.Name = ToolExecuteCode
			req.Params.Arguments = map[string]any{"code": "x"}
			if tc.token != nil {
				req.Params.Meta = &mcp.Meta{ProgressToken: tc.token}
			}
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := c.CallTool(ctx, req)
				done <- err
			}()
			if tc.token == nil {
				close(ex.release)
				if err := within(t, done, "the reply"); err != nil {
					t.Fatal(err)
				}
				select {
				case n := <-notes:
					t.Errorf("progress without a token: %+v", n)
				default:
				}
				return
			}
			// mcp-go may drop a notification now and then (a finished
			// request's forwarder can take one): the program reports
			// until one arrives.
			n := within(t, notes, "a progress notification")
			for n.Params.AdditionalFields["progressToken"] != tc.token {
				// A late one of the last call.
				n = within(t, notes, "a progress notification")
			}
			close(ex.release)
			if err := within(t, done, "the reply"); err != nil {
				t.Fatal(err)
			}
			f := n.Params.AdditionalFields
			if p, _ := f["progress"].(float64); f["progressToken"] != tc.token || p < 1 || f["total"] != float64(1000) || f["message"] != "tick of x" {
				t.Errorf("progress notification %+v", f)
			}
		})
	}
}

func TestTaskAdmission(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newTaskRuns()
	steps := []struct {
		tenant string
		ttl    time.Duration
		at     time.Duration // after now
		ok     bool
	}{
		{"acme", time.Minute, 0, true},
		{"acme", time.Hour, time.Second, true},
		{"acme", time.Hour, 2 * time.Second, false}, // two kept: the bound
		{"other", time.Hour, 3 * time.Second, true}, // tenants do not share it
		{"acme", time.Hour, time.Minute, true},      // the first one expired
		{"acme", time.Hour, time.Minute + time.Second, false},
	}
	for i, s := range steps {
		err := r.admit(s.tenant, s.ttl, now.Add(s.at), 2)
		if (err == nil) != s.ok {
			t.Fatalf("step %d (%s at +%s): %v, want admitted %v", i, s.tenant, s.at, err, s.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "keeps 2 execute_code tasks") {
			t.Errorf("step %d: refusal %q does not say why", i, err)
		}
	}
}

// TestExecuteCodeTaskBound: past Options.MaxTasksPerTenant, a
// task-augmented execute_code is refused before mcp-go creates its task,
// while plain calls go on.
func TestExecuteCodeTaskBound(t *testing.T) {
	ex := newHeldExecutor()
	close(ex.release)
	w := newWorld(t, func(o *Options, _ *world) { o.Executor, o.MaxTasksPerTenant = ex, 2 })
	c := connect(t, w.url+endpoint.MCPPath)
	for range 2 {
		callAsTask(t, c, "print(1)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(901)),
		Method: string(mcp.MethodToolsCall), Params: map[string]any{
			"name": ToolExecuteCode, "arguments": map[string]any{"code": "print(3)"}, "task": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || !strings.Contains(res.Error.Message, "keeps 2 execute_code tasks") {
		t.Fatalf("a third task: %+v, want refused for the tenant's bound", res)
	}
	if tasks, err := c.ListTasks(ctx, mcp.ListTasksRequest{}); err != nil || len(tasks.Tasks) != 2 {
		t.Errorf("tasks/list: %+v %v, want the two admitted", tasks, err)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = ToolExecuteCode
	call.Params.Arguments = map[string]any{"code": "print(4)"}
	if r, err := c.CallTool(ctx, call); err != nil || r.IsError {
		t.Errorf("a plain call after the bound: %+v %v", r, err)
	}
}

// TestTaskOnToolWithoutTasks: a task-augmented tools/call of a tool whose
// execution.taskSupport is absent (forbidden) is -32601, as MCP 2025-11-25
// says, on both transports; mcp-go would run it as a plain call, whose
// result a client waiting for a CreateTaskResult rejects.
func TestTaskOnToolWithoutTasks(t *testing.T) {
	w := newWorld(t)
	sse, err := mcpclient.NewSSEMCPClient(w.url + endpoint.SSEPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sse.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sse.Close() })
	if _, err := sse.Initialize(ctx, initRequest()); err != nil {
		t.Fatal(err)
	}
	clients := map[string]*mcpclient.Client{"streamable": connect(t, w.url+endpoint.MCPPath), "sse": sse}
	tests := []struct {
		tool string
		args map[string]any
		code int // 0: a CreateTaskResult
	}{
		{ToolSearchTools, map[string]any{"query": "add numbers"}, mcp.METHOD_NOT_FOUND},
		{ToolState, nil, mcp.METHOD_NOT_FOUND},
		{ToolExecuteCode, map[string]any{"code": "print(1)"}, 0},
		{"no_such_tool", nil, mcp.INVALID_PARAMS},
	}
	for name, c := range clients {
		for i, tt := range tests {
			res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(700 + i)),
				Method: string(mcp.MethodToolsCall), Params: map[string]any{"name": tt.tool, "arguments": tt.args, "task": map[string]any{"ttl": 60000}}})
			if err != nil {
				t.Fatalf("%s %s: %v", name, tt.tool, err)
			}
			if tt.code != 0 {
				if res.Error == nil || res.Error.Code != tt.code {
					t.Errorf("%s %s as a task: %+v %s, want error %d", name, tt.tool, res.Error, res.Result, tt.code)
				}
				continue
			}
			var created mcp.CreateTaskResult
			if res.Error != nil || json.Unmarshal(res.Result, &created) != nil || created.Task.TaskId == "" {
				t.Errorf("%s %s as a task: %+v %s, want a CreateTaskResult", name, tt.tool, res.Error, res.Result)
			}
		}
		// Without the task parameter the tool answers as before.
		if text, res := call(t, c, ToolSearchTools, map[string]any{"query": "add numbers"}); res.IsError {
			t.Errorf("%s search_tools: %s", name, text)
		}
	}
}
