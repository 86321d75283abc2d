package pipeline

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// recordRunner runs every program successfully and keeps the requests. A
// persistent program calling os._exit ends its interpreter, as the runtime
// reports it.
type recordRunner struct {
	mu   sync.Mutex
	reqs []sandbox.ExecRequest
}

func (r *recordRunner) Exec(_ context.Context, req sandbox.ExecRequest, _ sandbox.Host) (sandbox.ExecResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return sandbox.ExecResult{SandboxOK: true, SessionLost: req.Persistent && strings.Contains(req.Code, "os._exit")}, nil
}

func newInterpExecutor(t *testing.T, maxTotal int) (*Executor, *recordRunner) {
	t.Helper()
	ws, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	r := &recordRunner{}
	return &Executor{Pool: newInterpPool(t, maxTotal), Sandbox: r, Workspaces: ws, Log: hclog.NewNullLogger()}, r
}

// newInterpPool is a pool of up to maxTotal sandboxes that need no backend.
func newInterpPool(t *testing.T, maxTotal int) *pool.Pool {
	t.Helper()
	p, err := pool.New(nullBackend{}, pool.Config{MaxTotal: maxTotal, Template: func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// TestSessionInterpreterRequests: with SessionInterpreter, an execution runs
// in its session's interpreter with fresh globals; one that asks for a
// persistent interpreter keeps its globals, and one in a fresh sandbox
// forks as ever.
func TestSessionInterpreterRequests(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		on, persistent, fresh    bool
		wantPersistent, wantGlob bool
	}{
		{name: "off", on: false},
		{name: "off, persistent", persistent: true, wantPersistent: true},
		{name: "on", on: true, wantPersistent: true, wantGlob: true},
		{name: "on, persistent", on: true, persistent: true, wantPersistent: true},
		{name: "on, fresh sandbox", on: true, fresh: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, r := newInterpExecutor(t, 4)
			x.SessionInterpreter = tc.on
			if _, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: "acme", Session: "s1", Code: "print(1)", Persistent: tc.persistent, FreshSandbox: tc.fresh}); err != nil {
				t.Fatal(err)
			}
			got := r.reqs[0]
			if got.Persistent != tc.wantPersistent || got.FreshGlobals != tc.wantGlob || got.Session != "s1" {
				t.Errorf("request persistent %v fresh globals %v session %q, want %v %v s1", got.Persistent, got.FreshGlobals, got.Session, tc.wantPersistent, tc.wantGlob)
			}
		})
	}
}

// TestInterpreterLostWarning: a persistent session whose interpreter the
// pool ended for another session's execution, or that ended during one of
// its own executions (a program called os._exit), or that a restarted
// cexecd (a new pool over the same workspaces, as another replica has)
// never had, learns it from its next result, once; a session interpreter
// with fresh globals has nothing to lose and no warning.
func TestInterpreterLostWarning(t *testing.T) {
	for _, tc := range []struct {
		name       string
		on         bool
		persistent bool
		// lose is what session a runs after its first execution, as
		// session, code pairs, or nil for a new pool (restarted).
		lose []string
		want string
	}{
		{name: "taken", persistent: true, lose: []string{"b", "x = 1"}, want: "another session's execution needed its sandbox"},
		{name: "taken, fresh globals", on: true, lose: []string{"b", "x = 1"}},
		{name: "ended", persistent: true, lose: []string{"a", "import os\nos._exit(0)"}, want: "it ended during one of the session's executions"},
		{name: "ended, fresh globals", on: true, lose: []string{"a", "import os\nos._exit(0)"}},
		{name: "restarted", persistent: true, want: "this session's persistent interpreter is not in this cexecd (its last execution ran in sandbox sbx-acme-"},
		{name: "restarted, fresh globals", on: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, _ := newInterpExecutor(t, 1)
			x.SessionInterpreter = tc.on
			run := func(session, code string) string {
				t.Helper()
				res, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: "acme", Session: session, Code: code, Persistent: tc.persistent})
				if err != nil {
					t.Fatal(err)
				}
				return res.InterpreterLost
			}
			run("a", "x = 1")
			if tc.lose == nil {
				x.Pool = newInterpPool(t, 1)
			} else if got := run(tc.lose[0], tc.lose[1]); got != "" {
				t.Errorf("the losing execution warned %q", got)
			}
			got := run("a", "print(x)")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("InterpreterLost %q, want %q", got, tc.want)
			}
			// The session log keeps the warning with the execution.
			ten, err := x.Workspaces.Tenant("acme")
			if err != nil {
				t.Fatal(err)
			}
			log, err := ten.ReadSession("a")
			if err != nil || len(log.Entries) == 0 {
				t.Fatalf("session log: %v, %d entries", err, len(log.Entries))
			}
			if w := log.Entries[len(log.Entries)-1].Warnings; got == "" && len(w) != 0 || got != "" && (len(w) != 1 || w[0] != got) {
				t.Errorf("the log entry's warnings %q, want the warning %q", w, got)
			}
			if again := run("a", "print(x)"); again != "" {
				t.Errorf("told again: %q", again)
			}
		})
	}
}
