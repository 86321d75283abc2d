package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TopicRunRequest is a workflow run's signal or cancel sent to every
// replica, for the one that runs the run; its payload is a RunRequest.
// TopicRunReply is that replica's answer, a RunReply.
const (
	TopicRunRequest = "run-request"
	TopicRunReply   = "run-reply"
)

// DefaultRunReplyWait is how long Send waits for the replica that runs the
// run to answer.
const DefaultRunReplyWait = 5 * time.Second

// RunRequest is a signal or cancel of a workflow run that another replica
// runs.
type RunRequest struct {
	ID     string          `json:"id"`
	Tenant string          `json:"tenant"`
	Run    string          `json:"run"`
	Op     string          `json:"op"`
	Event  string          `json:"event,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// RunReply is the answer of the replica that runs the run: Error is empty
// when it applied the request; Kind says what kind of error it was, so
// that the sender reports it as the holder would have.
type RunReply struct {
	ID    string `json:"id"`
	Error string `json:"error,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// ErrNoReply: no replica answered a RunRequest in time.
var ErrNoReply = errors.New("no replica answered")

// Notifier is the store's side of notifications (Postgres).
type Notifier interface {
	Notify(ctx context.Context, topic, payload string) error
	Subscribe(topic string, fn func(payload string))
}

// RunRequests sends RunRequests and matches the replies to them, and
// answers the requests of other replicas with serve.
type RunRequests struct {
	n    Notifier
	wait time.Duration
	log  hclog.Logger

	mu      sync.Mutex
	waiting map[string]chan RunReply
}

// NewRunRequests subscribes to the replies of run requests; Serve answers
// other replicas' requests. wait is how long Send waits for a reply (0:
// DefaultRunReplyWait).
func NewRunRequests(n Notifier, wait time.Duration, log hclog.Logger) *RunRequests {
	if wait <= 0 {
		wait = DefaultRunReplyWait
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	r := &RunRequests{n: n, wait: wait, log: log, waiting: map[string]chan RunReply{}}
	n.Subscribe(TopicRunReply, r.deliver)
	return r
}

// Serve answers the requests of other replicas: serve applies one to a run
// of this replica, ok false when the run is not live here, and then this
// replica stays silent (the one that runs it answers). serve runs on its
// own goroutine, with a ctx that ends after half the wait.
func (r *RunRequests) Serve(serve func(ctx context.Context, req RunRequest) (reply RunReply, ok bool)) {
	r.n.Subscribe(TopicRunRequest, func(payload string) {
		var req RunRequest
		if err := json.Unmarshal([]byte(payload), &req); err != nil || req.ID == "" {
			return
		}
		// Applying a request blocks (a cancel waits for the run to end);
		// the listener must not. It gets half the sender's wait, so that
		// its reply comes while the sender still waits.
		go func() {
			actx, cancel := context.WithTimeout(context.Background(), r.wait/2)
			reply, ok := serve(actx, req)
			cancel()
			if !ok {
				return
			}
			reply.ID = req.ID
			b, _ := json.Marshal(reply)
			ctx, cancel := context.WithTimeout(context.Background(), r.wait/2)
			defer cancel()
			if err := r.n.Notify(ctx, TopicRunReply, string(b)); err != nil {
				r.log.Warn("reply to a forwarded workflow request not sent", "run", req.Run, "op", req.Op, "error", err)
			}
		}()
	})
}

// deliver hands a reply to the Send waiting for it; a reply nobody waits
// for (it came late, or is another replica's) is dropped.
func (r *RunRequests) deliver(payload string) {
	var reply RunReply
	if err := json.Unmarshal([]byte(payload), &reply); err != nil || reply.ID == "" {
		return
	}
	r.mu.Lock()
	ch := r.waiting[reply.ID]
	delete(r.waiting, reply.ID)
	r.mu.Unlock()
	if ch != nil {
		ch <- reply // buffered for one, and removed: never blocks
	}
}

// Send sends req to the other replicas and returns the reply of the one
// that runs the run. It fails wrapping ErrNoReply when none answered in
// time, and ErrTooLarge when the request does not fit in a notification.
func (r *RunRequests) Send(ctx context.Context, req RunRequest) (RunReply, error) {
	req.ID = rand.Text()
	b, err := json.Marshal(req)
	if err != nil {
		return RunReply{}, fmt.Errorf("store: encode run request: %w", err)
	}
	ch := make(chan RunReply, 1)
	r.mu.Lock()
	r.waiting[req.ID] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, req.ID)
		r.mu.Unlock()
	}()
	if err := r.n.Notify(ctx, TopicRunRequest, string(b)); err != nil {
		return RunReply{}, err
	}
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case reply := <-ch:
		return reply, nil
	case <-ctx.Done():
		return RunReply{}, ctx.Err()
	case <-t.C:
		return RunReply{}, fmt.Errorf("store: run %s: %w within %s", req.Run, ErrNoReply, r.wait)
	}
}
