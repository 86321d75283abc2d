package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/workspace"
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
