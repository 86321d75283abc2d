package mcpface

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// SecretAsker is a WorkflowService that can take the secret fields of a
// listen's question on a one-time page of its own: the answer goes from
// the user's browser to cexecd and into the run, never through the agent's
// client. AskSecret opens the page for schema (the secret fields only),
// whose answer, merged into known (the rest of the answer, a JSON object),
// signals run with event; done reports once when that happened or failed.
// The page closes when ctx ends.
type SecretAsker interface {
	AskSecret(ctx context.Context, sc Scope, run, event string, schema, known json.RawMessage) (pageURL string, done <-chan error, err error)
}

// splitSecret splits a question (an elicitation requestedSchema) into its
// plain fields and its secret ones: those marked with JSON Schema's
// "writeOnly": true (or "format": "password"). Secret is nil when none is.
func splitSecret(ask json.RawMessage) (plain, secret json.RawMessage, err error) {
	var s map[string]any
	if err := json.Unmarshal(ask, &s); err != nil {
		return nil, nil, fmt.Errorf("question: %w", err)
	}
	props, _ := s["properties"].(map[string]any)
	req, _ := s["required"].([]any)
	pp, sp := map[string]any{}, map[string]any{}
	for name, p := range props {
		if isSecret(p) {
			sp[name] = p
		} else {
			pp[name] = p
		}
	}
	if len(sp) == 0 {
		return ask, nil, nil
	}
	part := func(props map[string]any) (json.RawMessage, error) {
		var r []any
		for _, n := range req {
			if name, _ := n.(string); props[name] != nil {
				r = append(r, name)
			}
		}
		out := map[string]any{"type": "object", "properties": props}
		if len(r) > 0 {
			out["required"] = r
		}
		return json.Marshal(out)
	}
	if len(pp) > 0 {
		if plain, err = part(pp); err != nil {
			return nil, nil, err
		}
	}
	secret, err = part(sp)
	return plain, secret, err
}

func isSecret(p any) bool {
	m, _ := p.(map[string]any)
	return m["writeOnly"] == true || m["format"] == "password"
}

// canAskSecret reports whether the secret fields of a question can be
// asked: the daemon serves pages and the client shows URL elicitations.
func (f *Face) canAskSecret(a *Asker) bool {
	_, ok := f.o.Workflows.(SecretAsker)
	return ok && a.CanElicit(mcp.ElicitationModeURL)
}

// askSecret asks the secret fields of w's question on SecretAsker's page,
// shown to the user as a URL-mode elicitation; known is the answer to the
// plain fields. It returns what to tell the agent and whether the run was
// signalled. The secret never passes through here.
func (f *Face) askSecret(ctx context.Context, a *Asker, sc *Scope, st WorkflowRun, w *WorkflowWait, secret, known json.RawMessage) (string, bool) {
	event := w.Events[0]
	signal := fmt.Sprintf("answer with `cexecctl workflow signal %s %s --data JSON`", st.Run, event)
	sa, ok := f.o.Workflows.(SecretAsker)
	if !ok {
		return fmt.Sprintf("this daemon cannot ask the secret fields of %s; the run still waits: %s\n", w.Task, signal), false
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	page, done, err := sa.AskSecret(pctx, *sc, st.Run, event, secret, known)
	if err != nil {
		return fmt.Sprintf("a page for the secret fields of %s could not be opened (%v); the run still waits: %s\n", w.Task, err, signal), false
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return fmt.Sprintf("asking the user failed (%v); the run still waits: %s\n", err, signal), false
	}
	id := hex.EncodeToString(b)
	res, err := a.Elicit(ctx, mcp.ElicitationParams{
		Mode: mcp.ElicitationModeURL, URL: page, ElicitationID: id,
		Message: fmt.Sprintf("The workflow %s (run %s) waits at %s for %s, which asks for a secret. Open the link to enter it; it goes to cexec only.",
			st.Workflow, st.Run, w.Task, event),
	})
	switch {
	case err != nil:
		return fmt.Sprintf("asking the user for %s failed (%v); the run still waits: %s\n", event, err, signal), false
	case res.Action != mcp.ElicitationResponseActionAccept:
		return fmt.Sprintf("the user answered %s to the page for the secret fields of %s; the run still waits: %s\n", res.Action, w.Task, signal), false
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		return "", false
	}
	if err != nil {
		return fmt.Sprintf("the answer on the page for %s could not be given to the run (%v); the run still waits: %s\n", w.Task, err, signal), false
	}
	if err := a.ElicitationComplete(ctx, id); err != nil {
		f.log.Debug("elicitation complete notification", "error", err)
	}
	return fmt.Sprintf("the user answered the question of %s (event %s; its secret fields on cexec's page)\n", w.Task, event), true
}
