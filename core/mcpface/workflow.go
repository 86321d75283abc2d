package mcpface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/pluginapi"
)

// ToolWorkflow starts and follows workflow runs.
const ToolWorkflow = "workflow"

// Workflows are the tenant's workflow runs (core/workflow through the
// daemon, which restores PII tokens in inputs and signal data).
type Workflows interface {
	// ListWorkflows lists the stored workflows the tenant can start.
	ListWorkflows(ctx context.Context, sc Scope) ([]StoredWorkflow, error)
	// StartWorkflow starts a run of the stored workflow name.
	StartWorkflow(ctx context.Context, sc Scope, name string, input json.RawMessage) (WorkflowRun, error)
	WorkflowStatus(ctx context.Context, sc Scope, run string) (WorkflowRun, error)
	SignalWorkflow(ctx context.Context, sc Scope, run, event string, data json.RawMessage) (WorkflowRun, error)
}

// StoredWorkflow is a workflow the agent can start by name.
type StoredWorkflow struct {
	Name    string `json:"name"`
	Summary string `json:"summary,omitempty"`
	// Input names the input's required fields.
	Input []string `json:"input,omitempty"`
}

// WorkflowRun is a run as the agent sees it.
type WorkflowRun struct {
	Run       string          `json:"run"`
	Workflow  string          `json:"workflow"`
	State     string          `json:"state"`
	Task      string          `json:"task,omitempty"`
	TasksDone int             `json:"tasks_done"`
	Waiting   []WorkflowWait  `json:"waiting,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	Started   time.Time       `json:"-"`
}

// WorkflowWait is a listen waiting for one of its events.
type WorkflowWait struct {
	Task   string   `json:"task"`
	Events []string `json:"events"`
	// Ask is the question the listen carries: an elicitation
	// requestedSchema, asked of the agent's user when its client can.
	Ask json.RawMessage `json:"ask,omitempty"`
}

func (f *Face) workflow(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	args := req.GetArguments()
	raw := func(k string) json.RawMessage {
		v, ok := args[k]
		if !ok {
			return nil
		}
		b, _ := json.Marshal(v)
		return b
	}
	run := strings.TrimSpace(req.GetString("run", ""))
	var st WorkflowRun
	var err error
	switch action := req.GetString("action", ""); action {
	case "list":
		ws, err := f.o.Workflows.ListWorkflows(ctx, *sc)
		if err != nil {
			return failure("workflow", err)
		}
		if len(ws) == 0 {
			return textReply("No stored workflows.")
		}
		var b strings.Builder
		for _, w := range ws {
			fmt.Fprintf(&b, "%s: %s", w.Name, w.Summary)
			if len(w.Input) > 0 {
				fmt.Fprintf(&b, " (input: %s)", strings.Join(w.Input, ", "))
			}
			b.WriteString("\n")
		}
		return reply{text: b.String()}
	case "start":
		name := strings.TrimSpace(req.GetString("name", ""))
		if name == "" {
			return errorReply("workflow start: name the stored workflow to run")
		}
		st, err = f.o.Workflows.StartWorkflow(ctx, *sc, name, raw("input"))
		if errors.Is(err, pluginapi.ErrNotFound) {
			return f.unknownWorkflow(ctx, *sc, name)
		}
	case "status":
		if run == "" {
			return errorReply("workflow status: give the run id start returned")
		}
		st, err = f.o.Workflows.WorkflowStatus(ctx, *sc, run)
	case "signal":
		event := strings.TrimSpace(req.GetString("event", ""))
		if run == "" || event == "" {
			return errorReply("workflow signal: give run and the event it waits for (status lists them)")
		}
		st, err = f.o.Workflows.SignalWorkflow(ctx, *sc, run, event, raw("data"))
	default:
		return errorReply("workflow: action must be list, start, status or signal, not %q", cutRunes(action, maxQuoted))
	}
	if err != nil {
		return failure("workflow", err)
	}
	// After start and signal the run goes on: follow it a moment to the
	// question it may stop at next.
	st, note, err := f.askWaiting(ctx, sc, st, req.GetString("action", "") != "status")
	if err != nil {
		return failure("workflow", err)
	}
	return reply{text: note + workflowText(st), structured: st}
}

// unknownWorkflow is the message for a workflow the tenant does not have:
// it lists the ones it has, as the store's own message names a command
// only the operator can run.
func (f *Face) unknownWorkflow(ctx context.Context, sc Scope, name string) reply {
	quoted := cutRunes(name, maxQuoted)
	ws, err := f.o.Workflows.ListWorkflows(ctx, sc)
	if err != nil || len(ws) == 0 {
		return errorReply("no workflow named %q; none are stored", quoted)
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name
	}
	if c := closest(name, names); c != "" {
		return errorReply("no workflow named %q; did you mean %q? stored: %s (action list shows their inputs)", quoted, c, strings.Join(names, ", "))
	}
	return errorReply("no workflow named %q; stored: %s (action list shows their inputs)", quoted, strings.Join(names, ", "))
}

// workflowText is a run in a few lines.
func workflowText(st WorkflowRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s (%s): %s, %d tasks done", st.Run, st.Workflow, st.State, st.TasksDone)
	if st.Task != "" && st.State != "completed" {
		fmt.Fprintf(&b, ", at %s", st.Task)
	}
	b.WriteString("\n")
	for _, w := range st.Waiting {
		// "" (or no event listed) is a listen that takes any event.
		if len(w.Events) == 0 || slices.Contains(w.Events, "") {
			fmt.Fprintf(&b, "waiting in %s for any event: answer with action signal and an event name of your choice\n", w.Task)
			continue
		}
		fmt.Fprintf(&b, "waiting in %s for event %s: answer with action signal\n", w.Task, strings.Join(w.Events, " or "))
	}
	if len(st.Output) > 0 {
		fmt.Fprintf(&b, "output: %s\n", st.Output)
	}
	if st.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", st.Error)
	}
	return b.String()
}
