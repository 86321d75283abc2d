package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// PendingApproval is a tool call waiting for an operator's decision
// (`cexecctl approvals`). Arguments are shown with PII as tokens.
type PendingApproval struct {
	ID              string
	Tenant, Session string
	Server, Tool    string
	Arguments       json.RawMessage
	// Reason is the policy rule that asked for approval.
	Reason   string
	Created  time.Time
	Deadline time.Time
}

// ErrNoSuchApproval is Decide's error for an id that is not pending (never
// was, or already decided, timed out or abandoned).
var ErrNoSuchApproval = errors.New("no such pending approval")

// SharedApprovals is where replicas share the calls waiting for an
// operator (core/store's Postgres, through core/daemon): every replica
// lists and decides all of them, and the replica whose call waits hears the
// decision from Approvals.Deliver or, when that notification is lost, reads
// it back.
type SharedApprovals interface {
	// AddApproval records a call of this replica's.
	AddApproval(ctx context.Context, p PendingApproval) error
	// RemoveApproval drops a call of this replica's that waits no more.
	RemoveApproval(ctx context.Context, id string) error
	// PendingApprovals lists the undecided calls of every live replica,
	// oldest first.
	PendingApprovals(ctx context.Context) ([]PendingApproval, error)
	// DecideApproval records a decision and tells the call's replica;
	// found is false when the call is not pending.
	DecideApproval(ctx context.Context, id string, approve bool) (found bool, err error)
	// ApprovalDecision reads the decision on a call of this replica's.
	ApprovalDecision(ctx context.Context, id string) (decided, approve bool, err error)
}

// Approvals holds the calls waiting for an operator, in the daemon only:
// an approval is never taken from the program or the model. Safe for
// concurrent use.
type Approvals struct {
	// shared, when set, makes the queue every replica's.
	shared SharedApprovals
	// poll is how often a waiting call reads its decision back from shared,
	// in case the notification was lost.
	poll time.Duration
	log  hclog.Logger

	mu      sync.Mutex
	pending map[string]*waiting
}

type waiting struct {
	PendingApproval
	decided chan bool
}

// NewApprovals returns an empty queue of this daemon's.
func NewApprovals() *Approvals { return &Approvals{pending: map[string]*waiting{}} }

// NewSharedApprovals returns an empty queue that replicas share through s.
func NewSharedApprovals(s SharedApprovals, log hclog.Logger) *Approvals {
	a := NewApprovals()
	a.shared, a.poll, a.log = s, 2*time.Second, log
	return a
}

// List returns the pending approvals, oldest first: every live replica's
// when the queue is shared.
func (a *Approvals) List(ctx context.Context) ([]PendingApproval, error) {
	if a.shared != nil {
		return a.shared.PendingApprovals(ctx)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]PendingApproval, 0, len(a.pending))
	for _, w := range a.pending {
		out = append(out, w.PendingApproval)
	}
	slices.SortFunc(out, func(x, y PendingApproval) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return out, nil
}

// Decide approves or denies a pending call, of any replica when the queue
// is shared (the first decision wins).
func (a *Approvals) Decide(ctx context.Context, id string, approve bool) error {
	if a.shared != nil {
		found, err := a.shared.DecideApproval(ctx, id, approve)
		if err != nil {
			return fmt.Errorf("approval %q: %w", id, err)
		}
		if !found {
			return fmt.Errorf("approval %q: %w", id, ErrNoSuchApproval)
		}
		// A replica is not notified of its own decisions.
		a.Deliver(id, approve)
		return nil
	}
	if !a.deliver(id, approve) {
		return fmt.Errorf("approval %q: %w", id, ErrNoSuchApproval)
	}
	return nil
}

// Deliver hands a decision another replica took to the call of this
// replica's that waits for it, if any.
func (a *Approvals) Deliver(id string, approve bool) { a.deliver(id, approve) }

func (a *Approvals) deliver(id string, approve bool) bool {
	a.mu.Lock()
	w := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if w == nil {
		return false
	}
	w.decided <- approve
	return true
}

// wait queues p and waits for a decision or for ctx to end (the policy's
// timeout, the execution's end), which removes it.
func (a *Approvals) wait(ctx context.Context, p PendingApproval) (bool, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, fmt.Errorf("approval id: %w", err)
	}
	p.ID = hex.EncodeToString(b[:])
	p.Created = time.Now()
	if d, ok := ctx.Deadline(); ok {
		p.Deadline = d
	}
	w := &waiting{PendingApproval: p, decided: make(chan bool, 1)}
	a.mu.Lock()
	a.pending[p.ID] = w
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.pending, p.ID)
		a.mu.Unlock()
	}()
	var poll <-chan time.Time
	if a.shared != nil {
		if err := a.shared.AddApproval(ctx, p); err != nil {
			return false, err
		}
		defer a.removeShared(ctx, p.ID)
		t := time.NewTicker(a.poll)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case ok := <-w.decided:
			return ok, nil
		case <-poll:
			if decided, ok, err := a.shared.ApprovalDecision(ctx, p.ID); err == nil && decided {
				return ok, nil
			}
		case <-ctx.Done():
			// A decision may have come just before.
			select {
			case ok := <-w.decided:
				return ok, nil
			default:
			}
			if a.shared != nil {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				decided, ok, err := a.shared.ApprovalDecision(rctx, p.ID)
				cancel()
				if err == nil && decided {
					return ok, nil
				}
			}
			return false, ctx.Err()
		}
	}
}

// removeShared drops a call that waits no more from the shared queue,
// whatever became of its execution's context.
func (a *Approvals) removeShared(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := a.shared.RemoveApproval(rctx, id); err != nil {
		// Listed until the store's heartbeat reaches the database.
		a.log.Warn("a call that waits no more is still in the shared approval queue", "id", id, "error", err)
	}
}
