package mcpface

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cexec/cexec/pluginapi"
)

// memWorkflows stands in for the daemon's engine (the e2e tests drive the
// real one through this tool): one run that waits for "approval".
type memWorkflows struct {
	mu   sync.Mutex
	runs map[string]*WorkflowRun
}

func (m *memWorkflows) ListWorkflows(context.Context, Scope) ([]StoredWorkflow, error) {
	return []StoredWorkflow{{Name: "approve", Summary: "Ask, then act.", Input: []string{"to"}}}, nil
}

func (m *memWorkflows) StartWorkflow(_ context.Context, sc Scope, name string, input json.RawMessage) (WorkflowRun, error) {
	if name != "approve" && name != "asking" {
		// The workspace's own wording, which names a command the agent
		// cannot run.
		return WorkflowRun{}, fmt.Errorf("tenant %s has no workflow %s (cexecctl workflow ls lists them): %w", sc.Tenant, name, pluginapi.ErrNotFound)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil {
		m.runs = map[string]*WorkflowRun{}
	}
	r := &WorkflowRun{Run: fmt.Sprintf("r%d", len(m.runs)+1), Workflow: name, State: "waiting", Task: "ask",
		Waiting: []WorkflowWait{{Task: "ask", Events: []string{"approval"}}}, Output: input}
	if name == "asking" {
		r.Waiting[0].Ask = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}}}`)
	}
	m.runs[sc.Tenant+"/"+r.Run] = r
	return *r, nil
}

func (m *memWorkflows) WorkflowStatus(_ context.Context, sc Scope, run string) (WorkflowRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[sc.Tenant+"/"+run]
	if r == nil {
		return WorkflowRun{}, fmt.Errorf("no run %s", run)
	}
	return *r, nil
}

func (m *memWorkflows) SignalWorkflow(_ context.Context, sc Scope, run, event string, data json.RawMessage) (WorkflowRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[sc.Tenant+"/"+run]
	if r == nil || event != "approval" {
		return WorkflowRun{}, fmt.Errorf("run %s does not wait for %s", run, event)
	}
	r.State, r.Waiting, r.Output, r.TasksDone = "completed", nil, data, 2
	return *r, nil
}

func TestWorkflowTool(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	if text, _ := call(t, c, ToolWorkflow, map[string]any{"action": "list"}); text != "approve: Ask, then act. (input: to)\n" {
		t.Errorf("list: %q", text)
	}
	text, res := call(t, c, ToolWorkflow, map[string]any{"action": "start", "name": "approve", "input": map[string]any{"to": "ada@example.com"}})
	if res.IsError || !strings.Contains(text, "run r1 (approve): waiting") || !strings.Contains(text, "for event approval") {
		t.Fatalf("start: %s", text)
	}
	if strings.Contains(text, "ada@example.com") {
		t.Errorf("start reply shows raw PII: %s", text)
	}
	text, res = call(t, c, ToolWorkflow, map[string]any{"action": "signal", "run": "r1", "event": "approval", "data": map[string]any{"ok": true}})
	if res.IsError || !strings.Contains(text, "completed, 2 tasks done") || !strings.Contains(text, `output: {"ok":true}`) {
		t.Fatalf("signal: %s", text)
	}
	for _, bad := range []map[string]any{{"action": "start"}, {"action": "status"}, {"action": "signal", "run": "r1"}, {"action": "stop"}} {
		text, res := call(t, c, ToolWorkflow, bad)
		if !res.IsError {
			t.Errorf("%v: want an error, got %s", bad, text)
		}
	}
}

// TestWorkflowAskWithoutElicitation: a client that declared no elicitation
// is not asked a listen's question; the run waits for a signal as before.
func TestWorkflowAskWithoutElicitation(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	text, res := call(t, c, ToolWorkflow, map[string]any{"action": "start", "name": "asking"})
	if res.IsError || !strings.Contains(text, "waiting in ask for event approval: answer with action signal") || strings.Contains(text, "answered") || strings.Contains(text, "asking the user") {
		t.Fatalf("start: %q", text)
	}
	text, _ = call(t, c, ToolWorkflow, map[string]any{"action": "signal", "run": "r1", "event": "approval", "data": map[string]any{"approved": true}})
	if !strings.Contains(text, "completed") {
		t.Errorf("signal: %q", text)
	}
}

// TestWorkflowTextAnyEvent: a listen that takes any event ("" among its
// events) is shown as such, with how to answer it.
func TestWorkflowTextAnyEvent(t *testing.T) {
	for _, events := range [][]string{{""}, nil} {
		text := workflowText(WorkflowRun{Run: "r", State: "waiting", Waiting: []WorkflowWait{{Task: "ask", Events: events}}})
		if want := "waiting in ask for any event: answer with action signal and an event name of your choice\n"; !strings.Contains(text, want) {
			t.Errorf("events %q: text\n%s\nwant %q", events, text, want)
		}
	}
}
