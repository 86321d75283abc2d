package client

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// fakeControl is a control API server that records the last request and
// answers every workspace call with an empty response, or with fail. The
// daemon's side of these calls is tested in core/control; here it is the
// client's: what it sends and how it reports errors.
type fakeControl struct {
	cexecv1.UnimplementedControlServer

	mu   sync.Mutex
	last proto.Message
	fail error
}

func (f *fakeControl) failWith(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

func (f *fakeControl) sent() proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeControl) record(req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = req
	return f.fail
}

func (f *fakeControl) GetState(_ context.Context, r *cexecv1.GetStateRequest) (*cexecv1.GetStateResponse, error) {
	return &cexecv1.GetStateResponse{Data: []byte("{}")}, f.record(r)
}

func (f *fakeControl) PutState(_ context.Context, r *cexecv1.PutStateRequest) (*cexecv1.PutStateResponse, error) {
	return &cexecv1.PutStateResponse{State: &cexecv1.StateInfo{Name: r.GetName()}}, f.record(r)
}

func (f *fakeControl) ListState(_ context.Context, r *cexecv1.ListStateRequest) (*cexecv1.ListStateResponse, error) {
	return &cexecv1.ListStateResponse{}, f.record(r)
}

func (f *fakeControl) DeleteState(_ context.Context, r *cexecv1.DeleteStateRequest) (*cexecv1.DeleteStateResponse, error) {
	return &cexecv1.DeleteStateResponse{}, f.record(r)
}

func (f *fakeControl) ListSessions(_ context.Context, r *cexecv1.ListSessionsRequest) (*cexecv1.ListSessionsResponse, error) {
	return &cexecv1.ListSessionsResponse{}, f.record(r)
}

func (f *fakeControl) GetSession(_ context.Context, r *cexecv1.GetSessionRequest) (*cexecv1.GetSessionResponse, error) {
	return &cexecv1.GetSessionResponse{}, f.record(r)
}

func (f *fakeControl) ResumeSession(_ context.Context, r *cexecv1.ResumeSessionRequest) (*cexecv1.ResumeSessionResponse, error) {
	return &cexecv1.ResumeSessionResponse{}, f.record(r)
}

func (f *fakeControl) Checkpoint(_ context.Context, r *cexecv1.CheckpointRequest) (*cexecv1.CheckpointResponse, error) {
	return &cexecv1.CheckpointResponse{Seq: 3}, f.record(r)
}

func (f *fakeControl) ListSkills(_ context.Context, r *cexecv1.ListSkillsRequest) (*cexecv1.ListSkillsResponse, error) {
	return &cexecv1.ListSkillsResponse{}, f.record(r)
}

func (f *fakeControl) GetSkill(_ context.Context, r *cexecv1.GetSkillRequest) (*cexecv1.GetSkillResponse, error) {
	return &cexecv1.GetSkillResponse{Skill: &cexecv1.Skill{Name: r.GetName()}}, f.record(r)
}

func (f *fakeControl) SaveSkill(_ context.Context, r *cexecv1.SaveSkillRequest) (*cexecv1.SaveSkillResponse, error) {
	return &cexecv1.SaveSkillResponse{Skill: &cexecv1.Skill{Name: r.GetName()}}, f.record(r)
}

func (f *fakeControl) ListTenants(_ context.Context, r *cexecv1.ListTenantsRequest) (*cexecv1.ListTenantsResponse, error) {
	return &cexecv1.ListTenantsResponse{}, f.record(r)
}

func (f *fakeControl) GCTenants(_ context.Context, r *cexecv1.GCTenantsRequest) (*cexecv1.GCTenantsResponse, error) {
	return &cexecv1.GCTenantsResponse{}, f.record(r)
}

// fakeClient serves f on a unix socket and returns a client connected to it.
func fakeClient(t *testing.T, f cexecv1.ControlServer) *Client {
	t.Helper()
	c, _ := fakeServer(t, f)
	return c
}

// fakeServer is fakeClient that also returns the server.
func fakeServer(t *testing.T, f cexecv1.ControlServer) (*Client, *grpc.Server) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	cexecv1.RegisterControlServer(g, f)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	c, err := New(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, g
}

func TestWorkspaceCalls(t *testing.T) {
	f := &fakeControl{}
	c := fakeClient(t, f)
	tests := []struct {
		name string
		call func(ctx context.Context) error
		want proto.Message
		// prefix is how the call names itself in its errors.
		prefix string
	}{
		{"GetState", func(ctx context.Context) error { _, err := c.GetState(ctx, "t", "s.yaml"); return err },
			&cexecv1.GetStateRequest{Tenant: "t", Name: "s.yaml"}, "get state s.yaml: "},
		{"GetStateJSON", func(ctx context.Context) error { _, err := c.GetStateJSON(ctx, "", "s.yaml"); return err },
			&cexecv1.GetStateRequest{Name: "s.yaml", AsJson: true}, "get state s.yaml: "},
		{"PutState", func(ctx context.Context) error { _, err := c.PutState(ctx, "t", "a.json", []byte("true")); return err },
			&cexecv1.PutStateRequest{Tenant: "t", Name: "a.json", Data: []byte("true")}, "put state a.json: "},
		{"SaveState", func(ctx context.Context) error {
			_, err := c.SaveState(ctx, "t", "a.yaml", json.RawMessage(`{"k":1}`))
			return err
		}, &cexecv1.PutStateRequest{Tenant: "t", Name: "a.yaml", Data: []byte(`{"k":1}`), FromJson: true}, "save state a.yaml: "},
		{"ListState", func(ctx context.Context) error { _, err := c.ListState(ctx, "t"); return err },
			&cexecv1.ListStateRequest{Tenant: "t"}, "list state: "},
		{"DeleteState", func(ctx context.Context) error { return c.DeleteState(ctx, "t", "a.json") },
			&cexecv1.DeleteStateRequest{Tenant: "t", Name: "a.json"}, "delete state a.json: "},
		{"ListSessions", func(ctx context.Context) error { _, err := c.ListSessions(ctx, "t"); return err },
			&cexecv1.ListSessionsRequest{Tenant: "t"}, "list sessions: "},
		{"GetSession", func(ctx context.Context) error { _, err := c.GetSession(ctx, "t", "s1"); return err },
			&cexecv1.GetSessionRequest{Tenant: "t", Session: "s1"}, "get session s1: "},
		{"ResumeSession", func(ctx context.Context) error { _, err := c.ResumeSession(ctx, "t", "s1"); return err },
			&cexecv1.ResumeSessionRequest{Tenant: "t", Session: "s1"}, "resume session s1: "},
		{"Checkpoint", func(ctx context.Context) error {
			_, err := c.Checkpoint(ctx, "t", "s1", "two", json.RawMessage(`{"n":2}`))
			return err
		}, &cexecv1.CheckpointRequest{Tenant: "t", Session: "s1", Step: "two", ContextJson: []byte(`{"n":2}`)}, "checkpoint session s1: "},
		{"ListSkills", func(ctx context.Context) error { _, err := c.ListSkills(ctx, "t"); return err },
			&cexecv1.ListSkillsRequest{Tenant: "t"}, "list skills: "},
		{"GetSkill", func(ctx context.Context) error { _, err := c.GetSkill(ctx, "t", "adder"); return err },
			&cexecv1.GetSkillRequest{Tenant: "t", Name: "adder"}, "get skill adder: "},
		{"SaveSkill", func(ctx context.Context) error { _, err := c.SaveSkill(ctx, "t", "adder", "Add", "code"); return err },
			&cexecv1.SaveSkillRequest{Tenant: "t", Name: "adder", Description: "Add", Code: "code"}, "save skill adder: "},
		{"ListTenants", func(ctx context.Context) error { _, err := c.ListTenants(ctx); return err },
			&cexecv1.ListTenantsRequest{}, "list tenants: "},
		{"GCTenants", func(ctx context.Context) error { _, err := c.GCTenants(ctx, time.Hour, true); return err },
			&cexecv1.GCTenantsRequest{OlderThanMs: 3600000, DryRun: true}, "gc tenants: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			f.failWith(nil)
			if err := tt.call(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.sent(); !proto.Equal(got, tt.want) {
				t.Errorf("sent %v, want %v", got, tt.want)
			}
			f.failWith(status.Error(codes.NotFound, "no such thing"))
			err := tt.call(ctx)
			if status.Code(err) != codes.NotFound {
				t.Errorf("error %v lost its gRPC status", err)
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error %q does not start with %q", err, tt.prefix)
			}
		})
	}
}
