package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
)

type fakePlugins struct{ states []PluginState }

func (f fakePlugins) PluginStates() []PluginState { return f.states }

func (f fakePlugins) Ping(_ context.Context, kind, name string) (pluginapi.Info, error) {
	for _, p := range f.states {
		if p.Kind == kind && p.Name == name {
			if p.Status != StateOK {
				return pluginapi.Info{}, fmt.Errorf("plugin %s: %w", name, pluginapi.ErrPluginShutdown)
			}
			return pluginapi.Info{Name: name, Kind: pluginapi.Kind(kind), Version: p.Version, APIVersions: []string{"v1"}}, nil
		}
	}
	return pluginapi.Info{}, fmt.Errorf("plugin %s %s: %w", kind, name, pluginapi.ErrNotFound)
}

type fakeConfig struct {
	path   string
	json   []byte
	err    error
	checks map[string]hcl.Diagnostics
}

func (f fakeConfig) Path() string                { return f.path }
func (f fakeConfig) MaskedJSON() ([]byte, error) { return f.json, f.err }
func (f fakeConfig) Check(_ context.Context, path string) (string, hcl.Diagnostics) {
	if path == "" {
		path = f.path
	}
	return path, f.checks[path]
}

// serve runs the server on a unix socket, as cexecd does, and returns a
// client for it.
func serve(t testing.TB, d Deps) cexecv1.ControlClient {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	New(d).Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return cexecv1.NewControlClient(conn)
}

var states = []PluginState{
	{Kind: "selector", Name: "keyword", Version: "0.1.0", APIVersion: "v1", Status: StateOK, PID: 42, Required: true},
	{Kind: "guard", Name: "pii", Version: "0.2.0", APIVersion: "v1", Status: StateRestarting, Restarts: 2, LastError: "exit status 137"},
	{Kind: "codegen", Name: "llm", Status: StateFailed, LastError: "no API key"},
	{Kind: "sandbox", Name: "bwrap", Status: StateDisabled},
}

func TestStatus(t *testing.T) {
	started := time.Now().Add(-3 * time.Second)
	tests := []struct {
		name   string
		states []PluginState
		want   *cexecv1.PluginSummary
	}{
		{"none", nil, &cexecv1.PluginSummary{}},
		{"mixed", states, &cexecv1.PluginSummary{Total: 4, Ok: 1, Failed: 1, Restarting: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, Deps{Version: "v9", Started: started, Socket: "/s", PID: 7,
				Plugins: fakePlugins{tt.states}, Config: fakeConfig{path: "/etc/cexec.hcl"}})
			r, err := c.Status(context.Background(), &cexecv1.StatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Version != "v9" || r.Pid != 7 || r.Socket != "/s" || r.ConfigFile != "/etc/cexec.hcl" || r.StartedUnixMs != started.UnixMilli() {
				t.Errorf("status = %v", r)
			}
			if r.UptimeMs < 3000 {
				t.Errorf("uptime %d ms, want >= 3000", r.UptimeMs)
			}
			if r.Goroutines <= 0 {
				t.Errorf("goroutines = %d, want the daemon's count", r.Goroutines)
			}
			got := r.Plugins
			if got.Total != tt.want.Total || got.Ok != tt.want.Ok || got.Failed != tt.want.Failed || got.Restarting != tt.want.Restarting {
				t.Errorf("summary = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestListPlugins(t *testing.T) {
	c := serve(t, Deps{Plugins: fakePlugins{states}, Config: fakeConfig{}})
	r, err := c.ListPlugins(context.Background(), &cexecv1.ListPluginsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Plugins) != len(states) {
		t.Fatalf("got %d plugins, want %d", len(r.Plugins), len(states))
	}
	for i, p := range r.Plugins {
		w := states[i]
		if p.Kind != w.Kind || p.Name != w.Name || p.Version != w.Version || p.ApiVersion != w.APIVersion ||
			p.Status != w.Status || int(p.Restarts) != w.Restarts || int(p.Pid) != w.PID || p.LastError != w.LastError || p.Required != w.Required {
			t.Errorf("plugin %d = %v, want %+v", i, p, w)
		}
	}
}

func TestPingPlugin(t *testing.T) {
	c := serve(t, Deps{Plugins: fakePlugins{states}, Config: fakeConfig{}})
	tests := []struct {
		kind, name string
		code       codes.Code
	}{
		{"selector", "keyword", codes.OK},
		{"selector", "nope", codes.NotFound},
		{"guard", "pii", codes.Unavailable},
		{"frobnicator", "x", codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.name, func(t *testing.T) {
			r, err := c.PingPlugin(context.Background(), &cexecv1.PingPluginRequest{Kind: tt.kind, Name: tt.name})
			if status.Code(err) != tt.code {
				t.Fatalf("code = %v (%v), want %v", status.Code(err), err, tt.code)
			}
			if err == nil && (r.Name != tt.name || r.Kind != tt.kind || r.Version != "0.1.0" || len(r.ApiVersions) != 1) {
				t.Errorf("ping = %v", r)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	rng := &hcl.Range{Filename: "/x/bad.hcl", Start: hcl.Pos{Line: 12, Column: 3}, End: hcl.Pos{Line: 12, Column: 9}}
	cfg := fakeConfig{path: "/x/own.hcl", checks: map[string]hcl.Diagnostics{
		"/x/bad.hcl": {
			{Severity: hcl.DiagError, Summary: "Unsupported block type", Detail: `Blocks of type "foo" are not expected here.`, Subject: rng},
			{Severity: hcl.DiagWarning, Summary: "no position"},
		},
	}}
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: cfg})
	tests := []struct {
		path, wantPath string
		want           []*cexecv1.Diagnostic
	}{
		{"", "/x/own.hcl", nil},
		{"/x/bad.hcl", "/x/bad.hcl", []*cexecv1.Diagnostic{
			{Severity: "error", Summary: "Unsupported block type", Detail: `Blocks of type "foo" are not expected here.`, Filename: "/x/bad.hcl", Line: 12, Column: 3},
			{Severity: "warning", Summary: "no position"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.wantPath, func(t *testing.T) {
			r, err := c.CheckConfig(context.Background(), &cexecv1.CheckConfigRequest{Path: tt.path})
			if err != nil {
				t.Fatal(err)
			}
			if r.Path != tt.wantPath || len(r.Diagnostics) != len(tt.want) {
				t.Fatalf("check = %v", r)
			}
			for i, d := range r.Diagnostics {
				w := tt.want[i]
				if d.Severity != w.Severity || d.Summary != w.Summary || d.Detail != w.Detail || d.Filename != w.Filename || d.Line != w.Line || d.Column != w.Column {
					t.Errorf("diag %d = %v, want %v", i, d, w)
				}
			}
		})
	}
}

func TestShowConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  fakeConfig
		code codes.Code
	}{
		{"ok", fakeConfig{path: "/c.hcl", json: []byte(`{"token":"(sensitive)"}`)}, codes.OK},
		{"render error", fakeConfig{err: errors.New("boom")}, codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, Deps{Plugins: fakePlugins{}, Config: tt.cfg})
			r, err := c.ShowConfig(context.Background(), &cexecv1.ShowConfigRequest{})
			if status.Code(err) != tt.code {
				t.Fatalf("code = %v, want %v", status.Code(err), tt.code)
			}
			if err == nil && (r.Path != tt.cfg.path || string(r.ConfigJson) != string(tt.cfg.json)) {
				t.Errorf("show = %v", r)
			}
		})
	}
}

type fakeExec struct{ err error }

func (f fakeExec) Exec(_ context.Context, req *cexecv1.ExecRequest, send func(*cexecv1.ExecEvent) error) error {
	if f.err != nil {
		return f.err
	}
	if err := send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Output{Output: &cexecv1.Output{Stream: "stdout", Data: []byte(req.Code)}}}); err != nil {
		return err
	}
	return send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Result{Result: &cexecv1.ExecResult{ExitCode: 0}}})
}

func TestExec(t *testing.T) {
	tests := []struct {
		name      string
		exec      Executor
		timeoutMs int64
		code      codes.Code
		events    int
	}{
		{"not wired", nil, 0, codes.Unimplemented, 0},
		{"streams", fakeExec{}, 0, codes.OK, 2},
		{"pool full", fakeExec{err: fmt.Errorf("acquire: %w", pluginapi.ErrResourceExhausted)}, 0, codes.ResourceExhausted, 0},
		{"longest timeout", fakeExec{}, maxTimeout.Milliseconds(), codes.OK, 2},
		{"negative timeout", fakeExec{}, -1000, codes.InvalidArgument, 0},
		{"timeout too long", fakeExec{}, maxTimeout.Milliseconds() + 1, codes.InvalidArgument, 0},
		{"timeout past a time.Duration", fakeExec{}, math.MaxInt64, codes.InvalidArgument, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Exec: tt.exec})
			s, err := c.Exec(context.Background(), &cexecv1.ExecRequest{Code: "print(1)", TimeoutMs: tt.timeoutMs})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				_, err = s.Recv()
				if err != nil {
					break
				}
				n++
			}
			switch {
			case tt.code == codes.OK && !errors.Is(err, io.EOF):
				t.Errorf("stream ended with %v, want EOF", err)
			case tt.code != codes.OK && status.Code(err) != tt.code:
				t.Errorf("code = %v (%v), want %v", status.Code(err), err, tt.code)
			}
			if n != tt.events {
				t.Errorf("got %d events, want %d", n, tt.events)
			}
		})
	}
}

// sessionErr is an executor's error that names the session it ran in, as
// the pipeline's does.
type sessionErr struct{ error }

func (sessionErr) ExecSession() string { return "s-made-by-the-executor" }
func (e sessionErr) Unwrap() error     { return e.error }

// TestExecFailedLogNamesSession: a request that named no session fails in
// the one the executor made, and the log line of the failure names that
// one, not an empty session.
func TestExecFailedLogNamesSession(t *testing.T) {
	var buf testutil.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf})
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Log: log,
		Exec: fakeExec{err: fmt.Errorf("run in sandbox sb-1: %w", sessionErr{pluginapi.ErrUnavailable})}})
	s, err := c.Exec(context.Background(), &cexecv1.ExecRequest{Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !strings.Contains(err.Error(), "run in sandbox sb-1") {
		t.Fatalf("stream ended with %v, want the executor's error", err)
	}
	if got := buf.String(); !strings.Contains(got, "exec failed: tenant=\"\" session=s-made-by-the-executor") {
		t.Errorf("log %q does not name the executor's session", got)
	}
}
