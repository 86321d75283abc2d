package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// memShared is a SharedApprovals for several replicas in one process: one
// table, and notifications that reach the call's replica unless dropped.
// core/store's tests run the real one against PostgreSQL.
type memShared struct {
	mu       sync.Mutex
	rows     map[string]*memRow
	replicas map[string]*Approvals
	drop     bool // lose notifications
	addErr   error
}

type memRow struct {
	p        PendingApproval
	replica  string
	decision *bool
}

// replicaView is one replica's view of m.
type replicaView struct {
	m  *memShared
	id string
}

func (r replicaView) AddApproval(_ context.Context, p PendingApproval) error {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if r.m.addErr != nil {
		return r.m.addErr
	}
	r.m.rows[p.ID] = &memRow{p: p, replica: r.id}
	return nil
}

func (r replicaView) RemoveApproval(_ context.Context, id string) error {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if row := r.m.rows[id]; row != nil && row.replica == r.id {
		delete(r.m.rows, id)
	}
	return nil
}

func (r replicaView) PendingApprovals(context.Context) ([]PendingApproval, error) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	var out []PendingApproval
	for _, row := range r.m.rows {
		if row.decision == nil {
			out = append(out, row.p)
		}
	}
	return out, nil
}

func (r replicaView) DecideApproval(_ context.Context, id string, approve bool) (bool, error) {
	r.m.mu.Lock()
	row := r.m.rows[id]
	if row == nil || row.decision != nil {
		r.m.mu.Unlock()
		return false, nil
	}
	row.decision = &approve
	owner, drop := r.m.replicas[row.replica], r.m.drop || row.replica == r.id
	r.m.mu.Unlock()
	if !drop {
		owner.Deliver(id, approve)
	}
	return true, nil
}

func (r replicaView) ApprovalDecision(_ context.Context, id string) (bool, bool, error) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	row := r.m.rows[id]
	if row == nil || row.replica != r.id || row.decision == nil {
		return false, false, nil
	}
	return true, *row.decision, nil
}

// twoReplicas returns the shared table and the queues of replicas a and b.
func twoReplicas(poll time.Duration) (*memShared, *Approvals, *Approvals) {
	m := &memShared{rows: map[string]*memRow{}, replicas: map[string]*Approvals{}}
	for _, id := range []string{"a", "b"} {
		q := NewSharedApprovals(replicaView{m, id}, hclog.NewNullLogger())
		q.poll = poll
		m.replicas[id] = q
	}
	return m, m.replicas["a"], m.replicas["b"]
}

// waitListed waits until q lists one call and returns its id.
func waitListed(t *testing.T, q *Approvals) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if list, err := q.List(context.Background()); err == nil && len(list) == 1 {
			return list[0].ID
		}
	}
	t.Fatal("the call was never listed")
	return ""
}

// TestSharedApprovals: a call waiting in replica a is listed by replica b
// and decided there, through the notification or, when that is lost, by a
// reading the decision back; the owner's own decisions, unknown ids,
// timeouts and a store that cannot take the call.
func TestSharedApprovals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drop    bool
		decider string
		approve bool
	}{
		{"b approves, a is notified", false, "b", true},
		{"b denies, a is notified", false, "b", false},
		{"b approves, the notification is lost", true, "b", true},
		{"a decides its own call", false, "a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only a lost notification leaves the decision to the read-back.
			poll := time.Hour
			if tc.drop {
				poll = 20 * time.Millisecond
			}
			m, a, b := twoReplicas(poll)
			m.drop = tc.drop
			got := make(chan error, 1)
			var ok bool
			go func() {
				var err error
				ok, err = a.wait(context.Background(), PendingApproval{Tenant: "acme", Server: "crm", Tool: "delete"})
				got <- err
			}()
			id := waitListed(t, b)
			if err := m.replicas[tc.decider].Decide(context.Background(), id, tc.approve); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil || ok != tc.approve {
					t.Fatalf("a's call got %v %v, want %v", ok, err, tc.approve)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a's call never heard the decision")
			}
			if err := b.Decide(context.Background(), id, true); !errors.Is(err, ErrNoSuchApproval) {
				t.Errorf("a second decision: %v, want ErrNoSuchApproval", err)
			}
			if list, _ := b.List(context.Background()); len(list) != 0 {
				t.Errorf("a decided call is still listed: %+v", list)
			}
			m.mu.Lock()
			left := len(m.rows)
			m.mu.Unlock()
			if left != 0 {
				t.Errorf("%d rows left behind", left)
			}
		})
	}

	t.Run("unknown id", func(t *testing.T) {
		_, _, b := twoReplicas(time.Second)
		if err := b.Decide(context.Background(), "nope", true); !errors.Is(err, ErrNoSuchApproval) {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("timeout removes the call", func(t *testing.T) {
		m, a, _ := twoReplicas(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if ok, err := a.wait(ctx, PendingApproval{Tenant: "acme"}); ok || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v %v, want a timeout", ok, err)
		}
		if len(m.rows) != 0 {
			t.Fatalf("a timed-out call is still shared: %+v", m.rows)
		}
	})

	t.Run("a store that cannot take the call refuses it", func(t *testing.T) {
		m, a, _ := twoReplicas(time.Second)
		m.addErr = errors.New("store down")
		if ok, err := a.wait(context.Background(), PendingApproval{Tenant: "acme"}); ok || err == nil {
			t.Fatalf("got %v %v, want the store's error", ok, err)
		}
		if list, _ := a.List(context.Background()); len(list) != 0 {
			t.Fatalf("listed: %+v", list)
		}
	})
}
