package client

import (
	"context"
	"errors"
	"testing"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// heldExec streams one output event of Exec and holds the call open.
type heldExec struct {
	cexecv1.UnimplementedControlServer
}

func (heldExec) Exec(_ *cexecv1.ExecRequest, stream cexecv1.Control_ExecServer) error {
	if err := stream.Send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Output{Output: &cexecv1.Output{Stream: "stdout", Data: []byte("start\n")}}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

// TestExecStoppedMidway: a daemon that goes away during an execution
// already under way (its server stopped once the client has the first
// output, as a SIGTERM does) is reported as having stopped during it, not
// as "not running, start it".
func TestExecStoppedMidway(t *testing.T) {
	c, g := fakeServer(t, heldExec{})
	var events int
	var last error
	for ev, err := range c.Exec(context.Background(), &cexecv1.ExecRequest{Code: "print('start')"}) {
		if err != nil {
			last = err
			break
		}
		if ev != nil {
			events++
			go g.Stop()
		}
	}
	var nr *NotRunningError
	if events != 1 || !errors.Is(last, ErrStoppedMidway) || errors.As(last, &nr) {
		t.Fatalf("%d events, then %v; want one, then ErrStoppedMidway", events, last)
	}
}
