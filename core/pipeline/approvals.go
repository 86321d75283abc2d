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

// Approvals holds the calls waiting for an operator, in the daemon only:
// an approval is never taken from the program or the model. Safe for
// concurrent use.
type Approvals struct {
	mu      sync.Mutex
	pending map[string]*waiting
}

type waiting struct {
	PendingApproval
	decided chan bool
}

// NewApprovals returns an empty queue.
func NewApprovals() *Approvals { return &Approvals{pending: map[string]*waiting{}} }

// List returns the pending approvals, oldest first.
func (a *Approvals) List() []PendingApproval {
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
	return out
}

// Decide approves or denies a pending call.
func (a *Approvals) Decide(id string, approve bool) error {
	a.mu.Lock()
	w := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if w == nil {
		return fmt.Errorf("approval %q: %w", id, ErrNoSuchApproval)
	}
	w.decided <- approve
	return nil
}

// wait queues p and waits for Decide or for ctx to end (the policy's
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
	select {
	case ok := <-w.decided:
		return ok, nil
	case <-ctx.Done():
		a.mu.Lock()
		delete(a.pending, p.ID)
		a.mu.Unlock()
		// Decide may have won the race for the entry.
		select {
		case ok := <-w.decided:
			return ok, nil
		default:
		}
		return false, ctx.Err()
	}
}
