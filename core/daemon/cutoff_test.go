package daemon

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// blockingExec holds an Exec call until its context ends and reports the
// context's cause.
type blockingExec struct {
	cexecv1.UnimplementedControlServer
	started chan struct{}
	cause   chan error
}

func (b *blockingExec) Exec(_ *cexecv1.ExecRequest, stream cexecv1.Control_ExecServer) error {
	close(b.started)
	<-stream.Context().Done()
	b.cause <- context.Cause(stream.Context())
	return stream.Context().Err()
}

// TestStopServerSaysWhy: a call still running when shutdown's grace runs
// out is cut off with errShutDown as its context's cause, which the
// session log then gives instead of blaming the client.
func TestStopServerSaysWhy(t *testing.T) {
	opts, cut := newCutoff()
	g := grpc.NewServer(opts...)
	b := &blockingExec{started: make(chan struct{}), cause: make(chan error, 1)}
	cexecv1.RegisterControlServer(g, b)
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := cexecv1.NewControlClient(conn).Exec(context.Background(), &cexecv1.ExecRequest{Code: "x"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = stream.Recv() }()
	select {
	case <-b.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not start")
	}
	stopServer(&controlServer{Server: g, cut: cut}, 10*time.Millisecond, hclog.NewNullLogger())
	if c := <-b.cause; !errors.Is(c, errShutDown) {
		t.Errorf("cause %v, want errShutDown", c)
	}
}
