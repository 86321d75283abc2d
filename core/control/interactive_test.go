package control

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// askingExec asks the operator once and prints the answer, or the error.
type askingExec struct{}

func (askingExec) Exec(ctx context.Context, _ *cexecv1.ExecRequest, send func(*cexecv1.ExecEvent) error) error {
	out := "no operator"
	if op := OperatorFrom(ctx); op != nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := op.Ask(ctx, []byte(`{"message":"Proceed?"}`))
		out = string(res)
		if err != nil {
			out = "error: " + err.Error()
		}
	}
	if err := send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Output{Output: &cexecv1.Output{Stream: "stdout", Data: []byte(out)}}}); err != nil {
		return err
	}
	return send(&cexecv1.ExecEvent{Event: &cexecv1.ExecEvent_Result{Result: &cexecv1.ExecResult{}}})
}

type memQueue struct {
	mu      sync.Mutex
	decided map[string]bool
}

func (q *memQueue) Pending(context.Context) ([]PendingApproval, error) {
	return []PendingApproval{{ID: "a1", Tenant: "acme", Server: "fs", Tool: "rm", Arguments: []byte(`{"path":"[PATH_1]"}`), Created: time.Unix(1, 0)}}, nil
}

func (q *memQueue) Decide(_ context.Context, id string, approve bool) error {
	if id != "a1" {
		return ErrNoSuchApproval
	}
	q.mu.Lock()
	q.decided[id] = approve
	q.mu.Unlock()
	return nil
}

func dial(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestExecInteractive: the executor's question reaches the stream's client
// and its answer the executor; a client that stops sending can no longer
// be asked; the first message must start the program.
func TestExecInteractive(t *testing.T) {
	conn := dial(t, func(g *grpc.Server) { New(Deps{Exec: askingExec{}}).Interactive().Register(g) })
	c := cexecv1.NewInteractiveClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run := func(answer bool) string {
		t.Helper()
		s, err := c.ExecInteractive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&cexecv1.InteractiveInput{Msg: &cexecv1.InteractiveInput_Start{Start: &cexecv1.ExecRequest{Code: "x"}}}); err != nil {
			t.Fatal(err)
		}
		if !answer {
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
		}
		var out strings.Builder
		for {
			ev, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return out.String()
			}
			if err != nil {
				t.Fatal(err)
			}
			if q := ev.GetQuestion(); q != nil && answer {
				if q.GetParamsJson() != `{"message":"Proceed?"}` {
					t.Errorf("question %s", q.GetParamsJson())
				}
				if err := s.Send(&cexecv1.InteractiveInput{Msg: &cexecv1.InteractiveInput_Answer{Answer: &cexecv1.Answer{Id: q.GetId(), ResultJson: `{"action":"accept"}`}}}); err != nil {
					t.Fatal(err)
				}
			}
			if o := ev.GetExec().GetOutput(); o != nil {
				out.Write(o.GetData())
			}
		}
	}
	if got := run(true); got != `{"action":"accept"}` {
		t.Errorf("answered: the executor got %q", got)
	}
	if got := run(false); !strings.Contains(got, ErrOperatorGone.Error()) {
		t.Errorf("closed: the executor got %q", got)
	}

	s, err := c.ExecInteractive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&cexecv1.InteractiveInput{Msg: &cexecv1.InteractiveInput_Answer{Answer: &cexecv1.Answer{Id: "1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an answer first: %v, want InvalidArgument", err)
	}

	s, err = c.ExecInteractive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&cexecv1.InteractiveInput{Msg: &cexecv1.InteractiveInput_Start{Start: &cexecv1.ExecRequest{Code: "x", TimeoutMs: -1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a negative timeout: %v, want InvalidArgument", err)
	}
}

func TestApprovalsService(t *testing.T) {
	q := &memQueue{decided: map[string]bool{}}
	conn := dial(t, func(g *grpc.Server) { NewApprovals(q).Register(g) })
	c := cexecv1.NewApprovalsClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ls, err := c.ListApprovals(ctx, &cexecv1.ListApprovalsRequest{})
	if err != nil || len(ls.GetApprovals()) != 1 || ls.GetApprovals()[0].GetArgumentsJson() != `{"path":"[PATH_1]"}` ||
		ls.GetApprovals()[0].GetDeadline() != nil {
		t.Fatalf("list: %v, %v", ls, err)
	}
	if _, err := c.DecideApproval(ctx, &cexecv1.DecideApprovalRequest{Id: "a1", Approve: true}); err != nil || !q.decided["a1"] {
		t.Errorf("approve: %v, %v", err, q.decided)
	}
	for id, want := range map[string]codes.Code{"nope": codes.NotFound, "": codes.InvalidArgument} {
		if _, err := c.DecideApproval(ctx, &cexecv1.DecideApprovalRequest{Id: id}); status.Code(err) != want {
			t.Errorf("decide %q: %v, want %s", id, err, want)
		}
	}
}
