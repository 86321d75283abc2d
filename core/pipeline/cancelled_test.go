package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/bridge"
	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// callingRunner calls a tool, prints a line with an email address in it,
// then runs until its context ends: a program whose client gives up on it
// after it has acted.
type callingRunner struct{ heldRunner }

func (r *callingRunner) Exec(ctx context.Context, req sandbox.ExecRequest, h sandbox.Host) (sandbox.ExecResult, error) {
	if _, err := h.Call(ctx, bridge.MethodCallTool, json.RawMessage(`{"server":"crm","tool":"lookup","arguments":{"who":"Ada"}}`)); err != nil {
		return sandbox.ExecResult{}, err
	}
	_ = h.Output(sandbox.Stdout, []byte("mailed ada@example.com\n"))
	return r.heldRunner.Exec(ctx, req, h)
}

// TestCancelledExecutionKeepsWhatItDid: an agent's execution cancelled after
// it called a tool and printed still leaves the call in the session log and
// the audit log, and its output, tokenized, in the session log: cancelling
// must not erase what a program did.
func TestCancelledExecutionKeepsWhatItDid(t *testing.T) {
	data := t.TempDir()
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: piiGuard{detects: new(atomic.Int32)}}},
		Policies: map[string]*policy.Policy{"acme": {}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	r := &callingRunner{}
	p, err := pool.New(r, pool.Config{MaxTotal: 2, Template: func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	x := &Executor{Pool: p, Sandbox: r, Workspaces: ws, Log: hclog.NewNullLogger(), Guard: gr,
		Tools: bridge.New(&echoCatalog{}, nil, bridge.Limits{}), Audit: audit.New(audit.Options{Tenants: ws, RotateSize: 1 << 20, Keep: 2})}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := x.ExecuteCode(ctx, CodeRequest{Tenant: "acme", Session: "s1", Code: "long()", ModelFacing: true,
		Progress: func(Progress) { cancel() }})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("ExecuteCode = %+v, %v; want no result and context.Canceled", res, err)
	}

	tn, err := ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	log, err := tn.ReadSession("s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 1 || log.Entries[0].Result == nil {
		t.Fatalf("session log %+v, want one entry", log.Entries)
	}
	e := log.Entries[0]
	if e.Result.ErrorType != TypeCancelled {
		t.Errorf("logged result %+v, want %s", e.Result, TypeCancelled)
	}
	if !strings.HasPrefix(e.Result.Output, "mailed ") || !strings.Contains(e.Result.Output, "started") {
		t.Errorf("logged output %q, want what the program printed before it was stopped", e.Result.Output)
	}
	if strings.Contains(e.Result.Output, "ada@example.com") {
		t.Errorf("logged output %q holds the raw email address of a model-facing execution", e.Result.Output)
	}
	if len(e.ToolCalls) != 1 || e.ToolCalls[0].Tool != "lookup" || !e.ToolCalls[0].OK {
		t.Errorf("logged tool calls %+v, want the lookup the program made", e.ToolCalls)
	}

	b, err := os.ReadFile(filepath.Join(data, "tenants", "acme", "audit", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev audit.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev.Type+":"+ev.Outcome)
	}
	if got, want := strings.Join(events, " "), "execution:cancelled tool_call:ok"; got != want {
		t.Errorf("audit events %q, want %q", got, want)
	}
}
