package mcpface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

const (
	// askSettle bounds how long a start or signal follows its run to the
	// next listen; a run still busy after it is left to status.
	askSettle = 5 * time.Second
	askPoll   = 50 * time.Millisecond
	// askMax bounds the questions one tool call asks (a workflow that
	// listens in a loop would otherwise hold the call).
	askMax = 8
)

// askWaiting asks the agent's user, through form elicitation on this tool
// call, each question a listen of the run waits on (WorkflowWait.Ask), and
// signals the run with an accepted answer. Fields marked secret
// ("writeOnly": true) are asked on cexecd's own page instead (askSecret).
// A client without form
// elicitation, or a listen without a question, leaves the run as it is.
// The run is looked up and signalled in sc's tenant only. note tells the
// agent what was asked and how it ended.
func (f *Face) askWaiting(ctx context.Context, sc *Scope, st WorkflowRun, follow bool) (WorkflowRun, string, error) {
	a := AskerFrom(ctx)
	if a == nil || !a.CanElicit(mcp.ElicitationModeForm) {
		return st, "", nil
	}
	var note strings.Builder
	for range askMax {
		var err error
		if follow {
			if st, err = f.settle(ctx, sc, st); err != nil {
				return st, note.String(), err
			}
		}
		w := question(st)
		if w == nil {
			break
		}
		event := w.Events[0]
		// Fields marked secret are never put in a form: the answer would
		// pass through the agent's client.
		plain, secret, err := splitSecret(w.Ask)
		if err != nil {
			return st, note.String(), err
		}
		if secret != nil && !f.canAskSecret(a) {
			fmt.Fprintf(&note, "the question of %s has secret fields, which are asked only on a page outside this client, and this client cannot show one (no URL-mode elicitation); the run still waits: answer with `cexecctl workflow signal %s %s --data JSON`\n",
				w.Task, st.Run, event)
			break
		}
		// The plain fields are asked by form first; with secret ones the
		// page gets the form's answer and signals the run itself.
		known := json.RawMessage("{}")
		if plain != nil {
			res, err := a.Elicit(ctx, mcp.ElicitationParams{
				Mode:            mcp.ElicitationModeForm,
				Message:         fmt.Sprintf("The workflow %s (run %s) waits at %s for %s.", st.Workflow, st.Run, w.Task, event),
				RequestedSchema: plain,
			})
			if errors.Is(err, ErrCannotElicit) {
				break
			}
			if err != nil {
				fmt.Fprintf(&note, "asking the user for %s failed (%v); the run still waits\n", event, err)
				break
			}
			if res.Action != mcp.ElicitationResponseActionAccept {
				fmt.Fprintf(&note, "the user answered %s to the question of %s; the run still waits: answer with action signal, run %s, event %s and data\n",
					res.Action, w.Task, st.Run, event)
				break
			}
			if known, err = json.Marshal(res.Content); err != nil {
				return st, note.String(), fmt.Errorf("answer to %s: %w", w.Task, err)
			}
		}
		if secret == nil {
			if st, err = f.o.Workflows.SignalWorkflow(ctx, *sc, st.Run, event, known); err != nil {
				return st, note.String(), err
			}
			fmt.Fprintf(&note, "the user answered the question of %s (event %s)\n", w.Task, event)
		} else {
			msg, ok := f.askSecret(ctx, a, sc, st, w, secret, known)
			note.WriteString(msg)
			if !ok {
				break
			}
			if st, err = f.o.Workflows.WorkflowStatus(ctx, *sc, st.Run); err != nil {
				return st, note.String(), err
			}
		}
		follow = true
	}
	return st, note.String(), nil
}

// question is the first wait of st that carries a question.
func question(st WorkflowRun) *WorkflowWait {
	if st.State != "waiting" {
		return nil
	}
	for i, w := range st.Waiting {
		if len(w.Events) > 0 && len(w.Ask) > 0 && string(w.Ask) != "null" {
			return &st.Waiting[i]
		}
	}
	return nil
}

// settle follows a run that is queued or running until it waits or ends,
// for at most askSettle.
func (f *Face) settle(ctx context.Context, sc *Scope, st WorkflowRun) (WorkflowRun, error) {
	deadline := time.NewTimer(askSettle)
	defer deadline.Stop()
	tick := time.NewTicker(askPoll)
	defer tick.Stop()
	for st.State == "queued" || st.State == "running" {
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-deadline.C:
			return st, nil
		case <-tick.C:
		}
		next, err := f.o.Workflows.WorkflowStatus(ctx, *sc, st.Run)
		if err != nil {
			return st, err
		}
		st = next
	}
	return st, nil
}
