package client

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// stoppingControl streams one output event of Exec, then has the daemon
// stop (its server is stopped under the call), as a SIGTERM does.
type stoppingControl struct {
	cexecv1.UnimplementedControlServer
	stop func()
}

func (s *stoppingControl) Exec(_ *cexecv1.ExecRequest, stream cexecv1.Control_ExecServer) error {
	if err := stream.Send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Output{Output: &cexecv1.Output{Stream: "stdout", Data: []byte("start\n")}}}); err != nil {
		return err
	}
	go s.stop()
	<-stream.Context().Done()
	return stream.Context().Err()
}

// TestExecStoppedMidway: a daemon that goes away during an execution
// already under way is reported as having stopped during it, not as "not
// running, start it".
func TestExecStoppedMidway(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	cexecv1.RegisterControlServer(g, &stoppingControl{stop: g.Stop})
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	c, err := New(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var events int
	var last error
	for ev, err := range c.Exec(context.Background(), &cexecv1.ExecRequest{Code: "print('start')"}) {
		if err != nil {
			last = err
			break
		}
		if ev != nil {
			events++
		}
	}
	var nr *NotRunningError
	if events != 1 || !errors.Is(last, ErrStoppedMidway) || errors.As(last, &nr) {
		t.Fatalf("%d events, then %v; want one, then ErrStoppedMidway", events, last)
	}
}
