package control

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace"
)

// workspaceCalls are the control API's workspace requests, each decoded
// from the fuzzer's bytes and sent to the server over gRPC.
var workspaceCalls = []struct {
	req  func() proto.Message
	call func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error
}{
	{func() proto.Message { return &cexecv1.GetStateRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.GetState(ctx, m.(*cexecv1.GetStateRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.PutStateRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.PutState(ctx, m.(*cexecv1.PutStateRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.DeleteStateRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.DeleteState(ctx, m.(*cexecv1.DeleteStateRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.ListStateRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.ListState(ctx, m.(*cexecv1.ListStateRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.CheckpointRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.Checkpoint(ctx, m.(*cexecv1.CheckpointRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.GetSessionRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.GetSession(ctx, m.(*cexecv1.GetSessionRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.ResumeSessionRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.ResumeSession(ctx, m.(*cexecv1.ResumeSessionRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.SaveSkillRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.SaveSkill(ctx, m.(*cexecv1.SaveSkillRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.GetSkillRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.GetSkill(ctx, m.(*cexecv1.GetSkillRequest))
		return err
	}},
	{func() proto.Message { return &cexecv1.GCTenantsRequest{} }, func(ctx context.Context, c cexecv1.ControlClient, m proto.Message) error {
		_, err := c.GCTenants(ctx, m.(*cexecv1.GCTenantsRequest))
		return err
	}},
}

// FuzzWorkspaceRequests decodes control API requests from arbitrary bytes
// and sends them to the server over a real workspace. Whatever a request
// holds (names with "..", NUL or slashes, huge or negative numbers, invalid
// JSON or YAML), the server answers with a status that says what kind of
// problem it was: never a panic, never codes.Unknown (an error the server
// did not map).
func FuzzWorkspaceRequests(f *testing.F) {
	seeds := []proto.Message{
		&cexecv1.GetStateRequest{Tenant: "acme", Name: "a.yaml", AsJson: true},
		&cexecv1.PutStateRequest{Name: "a.json", Data: []byte(`{"k":1}`), FromJson: true},
		&cexecv1.PutStateRequest{Tenant: "../etc", Name: "../../x.yaml", Data: []byte("a: &a [*a]")},
		&cexecv1.DeleteStateRequest{Name: "missing.json"},
		&cexecv1.ListStateRequest{Tenant: "quota"},
		&cexecv1.CheckpointRequest{Session: "s1", Step: "one", ContextJson: []byte(`{"n":1}`)},
		&cexecv1.GetSessionRequest{Session: "s1"},
		&cexecv1.ResumeSessionRequest{Session: "s1"},
		&cexecv1.SaveSkillRequest{Name: "adder", Description: "Add", Code: "def add(a, b):\n    return a + b\n"},
		&cexecv1.GetSkillRequest{Name: "csv_report"},
		&cexecv1.GCTenantsRequest{OlderThanMs: -1, DryRun: true},
	}
	for i, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(callIndex(s, i)), b)
	}
	m, err := workspace.New(workspace.Options{
		DataDir: f.TempDir(),
		Tenants: []*config.Tenant{{ID: "quota", DiskQuota: 1024}},
		Logger:  hclog.NewNullLogger(),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = m.Close() })
	c := serve(f, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Workspaces: m, DefaultTenant: endpoint.DefaultTenant})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		call := workspaceCalls[int(which)%len(workspaceCalls)]
		req := call.req()
		if proto.Unmarshal(data, req) != nil {
			return // protobuf's own decoding; gRPC would refuse it the same way
		}
		err := call.call(t.Context(), c, req)
		if code := status.Code(err); code == codes.Unknown {
			t.Fatalf("%T %v: unmapped error %v", req, req, err)
		}
	})
}

// callIndex is the workspaceCalls entry whose request has s's type.
func callIndex(s proto.Message, fallback int) int {
	for i, c := range workspaceCalls {
		if proto.MessageName(c.req()) == proto.MessageName(s) {
			return i
		}
	}
	return fallback
}
