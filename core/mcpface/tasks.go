package mcpface

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TaskTTL is how long a task's result is kept for tasks/result after it
// is created (MCP 2025-11-25 tasks): the client's ttl, at most this, and
// this when it gives none.
const TaskTTL = time.Hour

// DefaultMaxTasksPerTenant is Options.MaxTasksPerTenant's default. mcp-go
// keeps every task, its result and a goroutine waiting for its ttl until
// the ttl passes, finished or not: unbounded, one tenant's task-augmented
// calls could fill the daemon's memory.
const DefaultMaxTasksPerTenant = 256

// taskRuns lets execute_code run as an MCP task (a task-augmented
// tools/call the client polls with tasks/get and tasks/result): mcp-go
// keeps the task store and answers the tasks/* methods, and this keeps
// the runs going.
//
// mcp-go starts a task's handler with a context derived from the
// tools/call request's, which ends as soon as the CreateTaskResult is
// sent, and cancels that same context on tasks/cancel. So the handler runs
// on a context of its own, without the request's cancellation, and
// tasks/cancel reaches it through the task hooks: the run is found by the
// request's task parameters (the one pointer the handler and the call
// hooks share) until the CreateTaskResult names its task id.
type taskRuns struct {
	mu       sync.Mutex
	byParams map[*mcp.TaskParams]*taskRun
	byID     map[string]*taskRun
	// kept holds, per tenant, when each task it has kept expires.
	kept map[string][]time.Time
}

type taskRun struct {
	id, session string
	cancel      context.CancelFunc
	// cancelled is set by tasks/cancel or the session's end, perhaps
	// before the handler starts.
	cancelled, started, finished bool
}

func newTaskRuns() *taskRuns {
	return &taskRuns{byParams: map[*mcp.TaskParams]*taskRun{}, byID: map[string]*taskRun{}, kept: map[string][]time.Time{}}
}

// hook registers the hooks that bound a task's lifetime and connect
// tasks/cancel to its run.
func (r *taskRuns) hook(h *server.Hooks, th *server.TaskHooks) {
	h.AddBeforeCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest) {
		if t := req.Params.Task; t != nil {
			ttl := TaskTTL.Milliseconds()
			if t.TTL == nil || *t.TTL <= 0 || *t.TTL > ttl {
				t.TTL = &ttl
			}
		}
	})
	h.AddAfterCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest, result any) {
		if created, ok := result.(*mcp.CreateTaskResult); ok && req.Params.Task != nil {
			r.bind(req.Params.Task, created.Task.TaskId)
		}
	})
	th.AddOnTaskCancelled(func(_ context.Context, m server.TaskMetrics) { r.cancelID(m.TaskID) })
}

// start gives the handler of a task-augmented call its own context, which
// tasks/cancel and the session's end cancel; done ends the run.
func (r *taskRuns) start(ctx context.Context, req mcp.CallToolRequest, session string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.mu.Lock()
	run := r.run(req.Params.Task)
	run.cancel, run.session, run.started = cancel, session, true
	if run.id != "" {
		// Bound already: the parameters have done their work.
		delete(r.byParams, req.Params.Task)
	}
	if run.cancelled {
		cancel()
	}
	r.mu.Unlock()
	return ctx, func() {
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		run.finished = true
		if run.id != "" {
			delete(r.byID, run.id)
		}
	}
}

// run returns the run of a call's task parameters, new if need be.
// Callers hold r.mu.
func (r *taskRuns) run(p *mcp.TaskParams) *taskRun {
	run := r.byParams[p]
	if run == nil {
		run = &taskRun{}
		r.byParams[p] = run
	}
	return run
}

// bind records the task id of a run, when the CreateTaskResult is out.
func (r *taskRuns) bind(p *mcp.TaskParams, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.run(p)
	run.id = id
	if run.started {
		delete(r.byParams, p)
	}
	if !run.finished {
		r.byID[id] = run
	}
}

func (r *taskRuns) cancelID(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run := r.byID[id]; run != nil {
		run.cancelled = true
		if run.cancel != nil {
			run.cancel()
		}
	}
}

// running reports whether session has a task run going (one not
// finished), which ending the session would cancel.
func (r *taskRuns) running(session string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range r.byID {
		if run.session == session && !run.finished {
			return true
		}
	}
	for _, run := range r.byParams {
		if run.session == session && !run.finished {
			return true
		}
	}
	return false
}

// endSession cancels the runs of an ended MCP session: nobody can ask for
// their results any more.
func (r *taskRuns) endSession(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range r.byID {
		if run.session == session && run.cancel != nil {
			run.cancelled = true
			run.cancel()
		}
	}
	for _, run := range r.byParams {
		if run.session == session && run.cancel != nil {
			run.cancelled = true
			run.cancel()
		}
	}
}

// admit counts a task tenant asks for, kept until now+ttl, and refuses it
// when the tenant keeps limit already.
func (r *taskRuns) admit(tenant string, ttl time.Duration, now time.Time, limit int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	live := slices.DeleteFunc(r.kept[tenant], func(exp time.Time) bool { return !exp.After(now) })
	if len(live) >= limit {
		r.kept[tenant] = live
		return fmt.Errorf("tenant %s keeps %d execute_code tasks, the most it may: a task is kept until its ttl "+
			"passes (at most %s), finished or not; wait for older ones to expire, or call execute_code without a task", tenant, len(live), TaskTTL)
	}
	r.kept[tenant] = append(live, now.Add(ttl))
	return nil
}

// taskCall is what admitTask reads of a request.
type taskCall struct {
	Method string `json:"method"`
	Params struct {
		Task *struct {
			TTL *int64 `json:"ttl"`
		} `json:"task"`
	} `json:"params"`
}

// admitTask is an OnRequestInitialization hook: it refuses a
// task-augmented tools/call, before mcp-go creates its task, when the
// tenant keeps Options.MaxTasksPerTenant tasks already.
func (f *Face) admitTask(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok || !bytes.Contains(raw, []byte(`"task"`)) {
		return nil
	}
	var call taskCall
	if json.Unmarshal(raw, &call) != nil || call.Method != string(mcp.MethodToolsCall) || call.Params.Task == nil {
		return nil
	}
	tenant, ok := tenantFrom(ctx)
	if !ok {
		return nil // the tool handler refuses a call without a tenant
	}
	ttl := TaskTTL
	if t := call.Params.Task.TTL; t != nil && *t > 0 && time.Duration(*t)*time.Millisecond < ttl {
		ttl = time.Duration(*t) * time.Millisecond
	}
	return f.tasks.admit(tenant, ttl, time.Now(), f.o.MaxTasksPerTenant)
}

// forbiddenTaskCall reads a request body: if it is a task-augmented
// tools/call of a tool that does not run as a task, it returns the error
// to answer it with, else nil.
func (f *Face) forbiddenTaskCall(body []byte) *mcp.JSONRPCError {
	if !bytes.Contains(body, []byte(`"task"`)) {
		return nil
	}
	var call struct {
		ID     *mcp.RequestId `json:"id"`
		Method string         `json:"method"`
		Params struct {
			Name string          `json:"name"`
			Task json.RawMessage `json:"task"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &call) != nil || call.ID == nil || call.Method != string(mcp.MethodToolsCall) || call.Params.Task == nil {
		return nil
	}
	t := f.srv.GetTool(call.Params.Name)
	if t == nil {
		return nil // mcp-go says the tool does not exist
	}
	if e := t.Tool.Execution; e != nil && (e.TaskSupport == mcp.TaskSupportOptional || e.TaskSupport == mcp.TaskSupportRequired) {
		return nil
	}
	err := mcp.NewJSONRPCError(*call.ID, mcp.METHOD_NOT_FOUND,
		fmt.Sprintf("tool %s does not run as a task (its execution.taskSupport is forbidden): call it without the task parameter", call.Params.Name), nil)
	return &err
}

// answerFirst gives the answers mcp-go would not give: each check may
// answer a message of a session itself, through send (the transport's way
// to reply), before mcp-go sees it. forbiddenTaskCall is one: a
// task-augmented tools/call of a tool that does not run as a task gets
// -32601 (method not found), as MCP 2025-11-25 says a server should, where
// mcp-go runs it as a plain call, whose CallToolResult a client waiting for
// a CreateTaskResult cannot take, and its hooks can only refuse with -32600.
func (f *Face) answerFirst(next http.Handler, send func(w http.ResponseWriter, r *http.Request, reply *mcp.JSONRPCError), checks ...func(body []byte) *mcp.JSONRPCError) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || sessionIDOf(r) == "" {
			next.ServeHTTP(w, r)
			return
		}
		// admit has bounded the body already.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			f.deny(w, r, http.StatusBadRequest, fmt.Sprintf("read request body: %v", err))
			return
		}
		for _, check := range checks {
			if reply := check(body); reply != nil {
				send(w, r, reply)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// replyJSON answers a streamable HTTP request with one JSON-RPC message.
func replyJSON(w http.ResponseWriter, _ *http.Request, reply *mcp.JSONRPCError) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

// replySSE answers an HTTP+SSE request as mcp-go does: 202, and the reply
// on the session's event stream.
func (f *Face) replySSE(w http.ResponseWriter, r *http.Request, reply *mcp.JSONRPCError) {
	if err := f.sse.SendEventToSession(sessionIDOf(r), reply); err != nil {
		f.deny(w, r, http.StatusServiceUnavailable, fmt.Sprintf("cannot answer on the session's stream: %v", err))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
