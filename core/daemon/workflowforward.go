package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/core/workflow"
	"github.com/cexec/cexec/pluginapi"
)

// maxForwardedData is the most bytes of signal data a signal forwarded to
// another replica carries: the request travels as a PostgreSQL NOTIFY,
// whose payload must stay under 8000 bytes, and data full of quotes takes
// twice its size there, beside the request's other fields.
const maxForwardedData = 3000

// Kinds of a forwarded request's error, so that the sender fails as the
// replica that runs the run did (gRPC FailedPrecondition, InvalidArgument,
// NotFound).
const (
	kindState    = "state"
	kindInvalid  = "invalid"
	kindNotFound = "notfound"
)

// runForwarder hands the Signal and Cancel of a run another replica runs
// to that replica over the store's notifications (workflow.Options.Forward)
// and applies those of the others to this replica's runs.
type runForwarder struct {
	rr *store.RunRequests
}

func newRunForwarder(p *store.Postgres, log hclog.Logger) *runForwarder {
	return &runForwarder{rr: store.NewRunRequests(p, 0, log)}
}

// serve applies other replicas' requests to the runs of eng.
func (f *runForwarder) serve(eng *workflow.Embedded) {
	f.rr.Serve(func(ctx context.Context, req store.RunRequest) (store.RunReply, bool) {
		here, err := eng.Apply(ctx, workflow.Forwarded{Tenant: req.Tenant, Run: req.Run, Op: req.Op, Event: req.Event, Data: req.Data})
		if !here {
			return store.RunReply{}, false
		}
		if err == nil {
			return store.RunReply{}, true
		}
		return store.RunReply{Error: err.Error(), Kind: errorKind(err)}, true
	})
}

func (f *runForwarder) forward(ctx context.Context, w workflow.Forwarded) error {
	if len(w.Data) > maxForwardedData {
		return fmt.Errorf("run %s runs on another replica, and signal data sent there may be at most %d bytes; this is %d: send less, or signal the run on the control socket of the replica that runs it: %w",
			w.Run, maxForwardedData, len(w.Data), pluginapi.ErrInvalidArgument)
	}
	reply, err := f.rr.Send(ctx, store.RunRequest{Tenant: w.Tenant, Run: w.Run, Op: w.Op, Event: w.Event, Data: w.Data})
	switch {
	case errors.Is(err, store.ErrNoReply):
		return fmt.Errorf("no replica answered for run %s; it may have just ended: check its status: %w", w.Run, workflow.ErrState)
	case errors.Is(err, store.ErrTooLarge):
		return fmt.Errorf("run %s runs on another replica, and the %s request is too large to send there (%w): send less, or use the control socket of the replica that runs it: %w",
			w.Run, w.Op, err, pluginapi.ErrInvalidArgument)
	case err != nil:
		return fmt.Errorf("run %s runs on another replica: send the %s there: %w", w.Run, w.Op, err)
	case reply.Error == "":
		return nil
	}
	return &forwardedError{msg: reply.Error, kind: errorOfKind(reply.Kind)}
}

// forwardedError is the error of the replica that runs the run, with the
// sentinel its kind names.
type forwardedError struct {
	msg  string
	kind error
}

func (e *forwardedError) Error() string { return e.msg }
func (e *forwardedError) Unwrap() error { return e.kind }

func errorKind(err error) string {
	switch {
	case errors.Is(err, workflow.ErrState):
		return kindState
	case errors.Is(err, pluginapi.ErrInvalidArgument):
		return kindInvalid
	case errors.Is(err, pluginapi.ErrNotFound):
		return kindNotFound
	}
	return ""
}

func errorOfKind(kind string) error {
	switch kind {
	case kindState:
		return workflow.ErrState
	case kindInvalid:
		return pluginapi.ErrInvalidArgument
	case kindNotFound:
		return pluginapi.ErrNotFound
	}
	return nil
}
