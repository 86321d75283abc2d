package client

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/workspace"
)

// workspaceClient serves the control API over a real workspace manager and
// returns a client connected to it.
func workspaceClient(t *testing.T) *Client {
	t.Helper()
	m, err := workspace.New(workspace.Options{DataDir: t.TempDir(), Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	control.New(control.Deps{Workspaces: m, DefaultTenant: endpoint.DefaultTenant}).Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	c, err := New(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestWorkspaceCalls(t *testing.T) {
	c := workspaceClient(t)
	ctx := context.Background()

	if _, err := c.SaveState(ctx, "", "s.yaml", json.RawMessage(`{"k":[1,2]}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := c.GetState(ctx, "default", "s.yaml"); err != nil || string(b) != "k:\n  - 1\n  - 2\n" {
		t.Errorf("GetState = %q, %v", b, err)
	}
	if b, err := c.GetStateJSON(ctx, "", "s.yaml"); err != nil || string(b) != `{"k":[1,2]}` {
		t.Errorf("GetStateJSON = %s, %v", b, err)
	}
	if info, err := c.PutState(ctx, "", "t.json", []byte(`true`)); err != nil || info.GetBytes() != 4 {
		t.Errorf("PutState = %v, %v", info, err)
	}
	if ls, err := c.ListState(ctx, ""); err != nil || len(ls) != 2 {
		t.Errorf("ListState = %v, %v", ls, err)
	}
	if err := c.DeleteState(ctx, "", "t.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetState(ctx, "", "t.json"); status.Code(err) != codes.NotFound || !strings.HasPrefix(err.Error(), "get state t.json: ") {
		t.Errorf("GetState of a deleted file: %v", err)
	}

	if seq, err := c.Checkpoint(ctx, "", "s1", "one", nil); err != nil || seq != 1 {
		t.Fatalf("Checkpoint = %d, %v", seq, err)
	}
	if seq, err := c.Checkpoint(ctx, "", "s1", "two", json.RawMessage(`{"n":2}`)); err != nil || seq != 2 {
		t.Fatalf("Checkpoint = %d, %v", seq, err)
	}
	if ss, err := c.ListSessions(ctx, ""); err != nil || len(ss) != 1 || ss[0].GetCheckpoints() != 2 {
		t.Errorf("ListSessions = %v, %v", ss, err)
	}
	if r, err := c.GetSession(ctx, "", "s1"); err != nil || len(r.GetEntries()) != 2 {
		t.Errorf("GetSession = %v, %v", r, err)
	}
	if r, err := c.ResumeSession(ctx, "", "s1"); err != nil || r.GetCheckpoint().GetStep() != "two" || string(r.GetCheckpoint().GetContextJson()) != `{"n":2}` {
		t.Errorf("ResumeSession = %v, %v", r, err)
	}

	if sk, err := c.SaveSkill(ctx, "", "adder", "Add numbers", "def add(a, b):\n    return a + b\n"); err != nil || sk.GetImport() != "skills.adder" {
		t.Fatalf("SaveSkill = %v, %v", sk, err)
	}
	if _, err := c.SaveSkill(ctx, "", "broken", "d", "def f(:\n"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("SaveSkill of bad code: %v", err)
	}
	if ls, err := c.ListSkills(ctx, ""); err != nil || len(ls) != 1 || ls[0].GetName() != "adder" {
		t.Errorf("ListSkills = %v, %v", ls, err)
	}
	if sk, err := c.GetSkill(ctx, "", "adder"); err != nil || !strings.Contains(sk.GetCode(), "return a + b") {
		t.Errorf("GetSkill = %v, %v", sk, err)
	}

	if ts, err := c.ListTenants(ctx); err != nil || len(ts) != 1 || ts[0].GetId() != "default" || ts[0].GetSessions() != 1 {
		t.Errorf("ListTenants = %v, %v", ts, err)
	}
	if rm, err := c.GCTenants(ctx, time.Hour, true); err != nil || len(rm) != 0 {
		t.Errorf("GCTenants of a fresh tenant = %v, %v", rm, err)
	}
}
