package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// nullBackend creates and destroys sandboxes that exist only in the pool's
// books.
type nullBackend struct{}

func (nullBackend) Create(context.Context, sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	return nil, nil
}
func (nullBackend) Destroy(context.Context, string) error { return nil }
func (nullBackend) Health(context.Context, string) error  { return nil }

// lostRunner is a restarted backend: the sandboxes in gone are unknown to
// it; in the others it runs the program, printing "ran".
type lostRunner struct {
	mu   sync.Mutex
	gone func(id string, n int) bool
	ids  []string
	// output makes a lost sandbox print before it fails.
	output bool
}

func (r *lostRunner) Exec(_ context.Context, req sandbox.ExecRequest, h sandbox.Host) (sandbox.ExecResult, error) {
	r.mu.Lock()
	r.ids = append(r.ids, req.SandboxID)
	n := len(r.ids)
	r.mu.Unlock()
	if r.gone(req.SandboxID, n) {
		if r.output {
			_ = h.Output(sandbox.Stdout, []byte("half"))
		}
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %q: %w", req.SandboxID, pluginapi.ErrNotFound)
	}
	_ = h.Output(sandbox.Stdout, []byte("ran\n"))
	return sandbox.ExecResult{SandboxOK: true}, nil
}

func TestExecuteCodeSandboxGoneWithBackend(t *testing.T) {
	tests := []struct {
		name   string
		gone   func(id string, n int) bool
		output bool
		// wantErr is a part of the error; "" means the program ran.
		wantErr string
		wantRun int
	}{
		{"first sandbox lost, second runs", func(_ string, n int) bool { return n == 1 }, false, "", 2},
		{"every sandbox lost", func(string, int) bool { return true }, false, "no longer has this sandbox (it was restarted); run the program again", 2},
		{"lost after the program printed: not run again", func(_ string, n int) bool { return n == 1 }, true, "not found", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ws.Close() })
			p, err := pool.New(nullBackend{}, pool.Config{MaxTotal: 4, Template: func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }}, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			r := &lostRunner{gone: tt.gone, output: tt.output}
			x := &Executor{Pool: p, Sandbox: r, Workspaces: ws, Log: hclog.NewNullLogger()}
			res, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: "acme", Code: "print('ran')"})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ExecuteCode: %v", err)
			case tt.wantErr == "" && string(res.Stdout) != "ran\n":
				t.Errorf("stdout %q, want the program's", res.Stdout)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("ExecuteCode error %v, want one saying %q", err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, pluginapi.ErrNotFound):
				t.Errorf("error %v does not wrap the backend's ErrNotFound", err)
			}
			if len(r.ids) != tt.wantRun {
				t.Errorf("%d Exec calls (%v), want %d", len(r.ids), r.ids, tt.wantRun)
			}
		})
	}
}

// TestRefusedExecutionsCounted: an execution that never starts, refused by
// the tenant's limits, the pool or its own session id, failed by the
// backend, or one that was cancelled, is counted in cexec_executions_total and audited with what
// happened.
func TestRefusedExecutionsCounted(t *testing.T) {
	tests := []struct {
		name    string
		tenant  string
		session string
		// hold takes what the execution then lacks.
		hold        func(t *testing.T, tn *workspace.Tenant, p *pool.Pool)
		runErr      error
		wantOutcome string
		wantReason  string
		wantSession string
	}{
		{name: "over the disk quota", tenant: "quota", session: "s1",
			hold: func(t *testing.T, tn *workspace.Tenant, _ *pool.Pool) {
				if err := os.WriteFile(filepath.Join(tn.WorkspaceDir(), "big"), make([]byte, 4<<10), 0o600); err != nil {
					t.Fatal(err)
				}
				if _, err := tn.CheckQuota(); !errors.Is(err, workspace.ErrQuotaExceeded) {
					t.Fatalf("CheckQuota = %v, want over quota", err)
				}
			},
			wantOutcome: metrics.OutcomeRefused, wantReason: "over its disk quota", wantSession: "s1"},
		{name: "at max_concurrent", tenant: "busy", session: "s1",
			hold: func(t *testing.T, tn *workspace.Tenant, _ *pool.Pool) {
				release, err := tn.Acquire()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(release)
			},
			wantOutcome: metrics.OutcomeRefused, wantReason: "allowed concurrent executions", wantSession: "s1"},
		{name: "invalid session", tenant: "badsession", session: "../etc",
			wantOutcome: metrics.OutcomeRefused, wantReason: "invalid session id", wantSession: ""},
		{name: "pool full", tenant: "full", session: "s1",
			hold: func(t *testing.T, _ *workspace.Tenant, p *pool.Pool) {
				lease, err := p.Acquire(context.Background(), "other")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lease.Release(true) })
			},
			wantOutcome: metrics.OutcomeRefused, wantReason: "sandbox pool is full", wantSession: "s1"},
		{name: "backend down", tenant: "down", session: "s1", runErr: fmt.Errorf("bwrap: %w", pluginapi.ErrUnavailable),
			wantOutcome: metrics.OutcomeFailed, wantReason: "bwrap", wantSession: "s1"},
		// The backend's Exec ends with the caller's context: a client's
		// abort or cexecd shutting down, not a backend failure.
		{name: "cancelled", tenant: "cancelled", session: "s1", runErr: context.Canceled,
			wantOutcome: metrics.OutcomeCancelled, wantReason: "Cancelled", wantSession: "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			ws, err := workspace.New(workspace.Options{DataDir: data,
				Tenants: []*config.Tenant{{ID: tt.tenant, DiskQuota: 1 << 10, MaxConcurrent: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ws.Close() })
			p, err := pool.New(nullBackend{}, pool.Config{MaxTotal: 1, Template: func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }}, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			tn, err := ws.Tenant(tt.tenant)
			if err != nil {
				t.Fatal(err)
			}
			if tt.hold != nil {
				tt.hold(t, tn, p)
			}
			log := audit.New(audit.Options{Tenants: ws, RotateSize: 1 << 20, Keep: 2})
			x := &Executor{Pool: p, Sandbox: failRunner{tt.runErr}, Workspaces: ws, Log: hclog.NewNullLogger(), Audit: log}
			if _, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: tt.tenant, Session: tt.session, Code: "print(1)"}); err == nil {
				t.Fatal("ExecuteCode ran; want it refused")
			}
			if got, want := executions(t, tt.tenant), map[string]string{tt.wantOutcome: "1"}; !maps.Equal(got, want) {
				t.Errorf("cexec_executions_total of tenant %s by outcome: %v, want %v", tt.tenant, got, want)
			}
			b, err := os.ReadFile(filepath.Join(data, "tenants", tt.tenant, "audit", "audit.jsonl"))
			if err != nil {
				t.Fatalf("no audit log: %v", err)
			}
			var e audit.Event
			if err := json.Unmarshal(bytes.TrimSpace(b), &e); err != nil {
				t.Fatalf("audit log %s: want one event: %v", b, err)
			}
			if e.Type != audit.TypeExecution || e.Outcome != tt.wantOutcome || !strings.Contains(e.Reason, tt.wantReason) || e.Session != tt.wantSession {
				t.Errorf("audit event %s, want an execution %s saying %q in session %q", b, tt.wantOutcome, tt.wantReason, tt.wantSession)
			}
		})
	}
}

// failRunner fails every execution with err, as a backend that is down.
type failRunner struct{ err error }

func (r failRunner) Exec(context.Context, sandbox.ExecRequest, sandbox.Host) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, r.err
}

// executions scrapes cexec_executions_total of tenant: value by outcome.
func executions(t *testing.T, tenant string) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	re := regexp.MustCompile(`(?m)^cexec_executions_total\{outcome="([a-z]+)",tenant="` + regexp.QuoteMeta(tenant) + `"\} (\S+)$`)
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(rec.Body.String(), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// failingSetup is a data_dir with its workspaces and a one-sandbox pool,
// for an Executor whose runner fails.
func failingSetup(t *testing.T) (data string, ws *workspace.Manager, p *pool.Pool) {
	t.Helper()
	data = t.TempDir()
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	p, err = pool.New(nullBackend{}, pool.Config{MaxTotal: 1, Template: func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return data, ws, p
}

// TestFailedExecutionNamesItsSession: an execution that named no session
// and failed after its session was made returns an error that names that
// session (ExecSession), the one its log entry and audit event are in, so
// the caller's log line of the failure can name it too.
func TestFailedExecutionNamesItsSession(t *testing.T) {
	data, ws, p := failingSetup(t)
	x := &Executor{Pool: p, Sandbox: failRunner{fmt.Errorf("bwrap: %w", pluginapi.ErrUnavailable)}, Workspaces: ws,
		Log: hclog.NewNullLogger(), Audit: audit.New(audit.Options{Tenants: ws, RotateSize: 1 << 20, Keep: 2})}
	_, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: "nosession", Code: "print(1)"})
	var named interface{ ExecSession() string }
	if !errors.As(err, &named) || named.ExecSession() == "" {
		t.Fatalf("ExecuteCode error %v names no session", err)
	}
	if !errors.Is(err, pluginapi.ErrUnavailable) || !strings.Contains(err.Error(), "bwrap") {
		t.Errorf("error %v lost its cause", err)
	}
	tn, err := ws.Tenant("nosession")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.ReadSession(named.ExecSession()); err != nil {
		t.Errorf("the error's session %q has no log: %v", named.ExecSession(), err)
	}
	b, err := os.ReadFile(filepath.Join(data, "tenants", "nosession", "audit", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var e audit.Event
	if err := json.Unmarshal(bytes.TrimSpace(b), &e); err != nil || e.Session != named.ExecSession() {
		t.Errorf("audit event %s (%v), want it in session %q", b, err, named.ExecSession())
	}
}

// sabotageRunner fails its execution after making the session's log
// unwritable (a folder where the file goes).
type sabotageRunner struct{ sessions string }

func (r sabotageRunner) Exec(_ context.Context, req sandbox.ExecRequest, _ sandbox.Host) (sandbox.ExecResult, error) {
	if err := os.MkdirAll(filepath.Join(r.sessions, req.Session+".jsonl"), 0o700); err != nil {
		return sandbox.ExecResult{}, err
	}
	return sandbox.ExecResult{}, fmt.Errorf("bwrap: %w", pluginapi.ErrUnavailable)
}

// TestFailedExecutionUnloggedIsSaid: an execution that failed and whose
// session log entry could not be written either leaves a warning in
// cexecd's log, as one that ran does: the entry is lost, and nothing else
// says so.
func TestFailedExecutionUnloggedIsSaid(t *testing.T) {
	data, ws, p := failingSetup(t)
	var logs testutil.Buffer
	x := &Executor{Pool: p, Sandbox: sabotageRunner{filepath.Join(data, "tenants", "acme", "sessions")}, Workspaces: ws,
		Log: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})}
	_, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: "acme", Session: "s1", Code: "print(1)"})
	if !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Fatalf("ExecuteCode: %v, want the runner's error", err)
	}
	if out := logs.String(); !strings.Contains(out, "log execution") || !strings.Contains(out, "session=s1") {
		t.Errorf("no warning that the entry was lost; log:\n%s", out)
	}
}
