package client

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// bigRunServer answers GetWorkflowRun with a run whose output has size bytes.
type bigRunServer struct {
	cexecv1.UnimplementedWorkflowsServer
	size int
}

func (s bigRunServer) GetWorkflowRun(context.Context, *cexecv1.WorkflowRunRequest) (*cexecv1.WorkflowRun, error) {
	return &cexecv1.WorkflowRun{Run: "r1", State: "completed", OutputJson: `"` + strings.Repeat("x", s.size) + `"`}, nil
}

// TestLargeAnswer: an answer larger than gRPC's default 4 MiB receive limit
// reaches the client. A workflow run's output may be 16 MiB (one
// expression's result, or one tool call's), and cexecctl workflow run and
// status failed on it with "received message larger than max".
func TestLargeAnswer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	cexecv1.RegisterWorkflowsServer(g, bigRunServer{size: 20 << 20})
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)

	c, err := New(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r, err := c.Workflows().Get(context.Background(), "default", "r1")
	if err != nil {
		t.Fatalf("status of a run with a 20 MiB output: %v", err)
	}
	if len(r.GetOutputJson()) != 20<<20+2 {
		t.Errorf("output of %d bytes; want %d", len(r.GetOutputJson()), 20<<20+2)
	}
}
