package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// AskFunc answers one of the daemon's questions during ExecInteractive: an
// MCP elicitation's params as JSON in, its result as JSON out (action
// accept, decline or cancel).
type AskFunc func(ctx context.Context, paramsJSON string) (resultJSON string, err error)

// ExecInteractive is Exec with someone to ask: when an upstream server
// elicits, or a tenant policy wants a call approved, the daemon asks
// through ask, which may take its time (output keeps streaming meanwhile).
// An error from ask cancels the question.
func (c *Client) ExecInteractive(ctx context.Context, req *cexecv1.ExecRequest, ask AskFunc) iter.Seq2[*cexecv1.ExecEvent, error] {
	return func(yield func(*cexecv1.ExecEvent, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		var asking sync.WaitGroup
		defer func() {
			cancel()
			asking.Wait()
		}()
		stream, err := cexecv1.NewInteractiveClient(c.conn).ExecInteractive(ctx)
		if err != nil {
			yield(nil, c.wrap(ctx, "exec", err))
			return
		}
		var sendMu sync.Mutex
		send := func(in *cexecv1.InteractiveInput) error {
			sendMu.Lock()
			defer sendMu.Unlock()
			return stream.Send(in)
		}
		if err := send(&cexecv1.InteractiveInput{Msg: &cexecv1.InteractiveInput_Start{Start: req}}); err != nil {
			yield(nil, c.wrap(ctx, "exec", err))
			return
		}
		got := false
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil && got {
				yield(nil, c.wrapMidway(ctx, "exec", err))
				return
			}
			if err != nil {
				yield(nil, c.wrap(ctx, "exec", err))
				return
			}
			got = true
			if q := ev.GetQuestion(); q != nil {
				asking.Add(1)
				go func() {
					defer asking.Done()
					res, err := ask(ctx, q.GetParamsJson())
					if err != nil {
						res = `{"action":"cancel"}`
					}
					// A failed send means the stream ended; Recv says why.
					_ = send(&cexecv1.InteractiveInput{Msg: &cexecv1.InteractiveInput_Answer{Answer: &cexecv1.Answer{Id: q.GetId(), ResultJson: res}}})
				}()
				continue
			}
			if !yield(ev.GetExec(), nil) {
				return
			}
		}
	}
}
