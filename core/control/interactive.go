package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/pluginapi"
)

// ErrOperatorGone is an Operator's error once the client can no longer be
// asked (it closed its side of the stream).
var ErrOperatorGone = errors.New("the operator's cexecctl no longer takes questions")

// Operator asks the operator behind an ExecInteractive stream: an MCP
// elicitation's params as JSON in, the result as JSON out.
type Operator interface {
	Ask(ctx context.Context, paramsJSON []byte) ([]byte, error)
}

type operatorKey struct{}

// OperatorFrom returns the operator of the ExecInteractive stream that ctx
// belongs to, or nil: Executor.Exec hands it to the execution, so that
// elicitations and approvals reach the terminal.
func OperatorFrom(ctx context.Context) Operator {
	o, _ := ctx.Value(operatorKey{}).(Operator)
	return o
}

// InteractiveServer is the Interactive service.
type InteractiveServer struct {
	cexecv1.UnimplementedInteractiveServer
	s *Server
}

// Interactive returns the Interactive service over the server's executor.
func (s *Server) Interactive() *InteractiveServer { return &InteractiveServer{s: s} }

// Register adds the Interactive service to g.
func (i *InteractiveServer) Register(g *grpc.Server) { cexecv1.RegisterInteractiveServer(g, i) }

// ExecInteractive runs the program the first message starts, with the
// stream's client as the execution's operator.
func (i *InteractiveServer) ExecInteractive(stream grpc.BidiStreamingServer[cexecv1.InteractiveInput, cexecv1.InteractiveEvent]) error {
	d := i.s.d
	if d.Exec == nil {
		return status.Error(codes.Unimplemented, "exec: no sandbox backend wired into cexecd yet")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	req := first.GetStart()
	if req == nil {
		return status.Error(codes.InvalidArgument, "the first message must start the program (start)")
	}
	if err := checkTimeout(req.GetTimeoutMs()); err != nil {
		return err
	}
	op := &streamOperator{stream: stream, waiting: map[string]chan []byte{}, gone: make(chan struct{})}
	go op.receive()
	ctx := context.WithValue(stream.Context(), operatorKey{}, Operator(op))
	send := func(ev *cexecv1.ExecEvent) error {
		return op.send(&cexecv1.InteractiveEvent{Event: &cexecv1.InteractiveEvent_Exec{Exec: ev}})
	}
	if err := d.Exec.Exec(ctx, req, send); err != nil {
		d.Log.Warn("exec failed", "tenant", req.GetTenant(), "session", execSession(req.GetSession(), err), "error", err)
		return pluginapi.ToStatus(err)
	}
	return nil
}

// streamOperator is the client of one ExecInteractive stream.
type streamOperator struct {
	stream grpc.BidiStreamingServer[cexecv1.InteractiveInput, cexecv1.InteractiveEvent]
	sendMu sync.Mutex

	mu      sync.Mutex
	next    int
	waiting map[string]chan []byte
	gone    chan struct{}
}

func (o *streamOperator) send(ev *cexecv1.InteractiveEvent) error {
	o.sendMu.Lock()
	defer o.sendMu.Unlock()
	return o.stream.Send(ev)
}

// receive routes answers to their questions until the client stops
// sending.
func (o *streamOperator) receive() {
	defer close(o.gone)
	for {
		in, err := o.stream.Recv()
		if err != nil {
			return
		}
		a := in.GetAnswer()
		if a == nil {
			continue
		}
		o.mu.Lock()
		ch := o.waiting[a.GetId()]
		delete(o.waiting, a.GetId())
		o.mu.Unlock()
		if ch != nil {
			ch <- []byte(a.GetResultJson())
		}
	}
}

func (o *streamOperator) Ask(ctx context.Context, params []byte) ([]byte, error) {
	select {
	case <-o.gone:
		return nil, ErrOperatorGone
	default:
	}
	ch := make(chan []byte, 1)
	o.mu.Lock()
	o.next++
	id := strconv.Itoa(o.next)
	o.waiting[id] = ch
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.waiting, id)
		o.mu.Unlock()
	}()
	if err := o.send(&cexecv1.InteractiveEvent{Event: &cexecv1.InteractiveEvent_Question{Question: &cexecv1.Question{Id: id, ParamsJson: string(params)}}}); err != nil {
		return nil, fmt.Errorf("ask the operator: %w", err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-o.gone:
		return nil, ErrOperatorGone
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
