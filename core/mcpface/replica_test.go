package mcpface

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// memLeases is a lease table two faces share, standing in for core/store's
// PostgreSQL (whose own tests run on a real one).
type memLeases struct {
	lock  sync.Mutex // makes ReserveSession's count and insert one step
	n     int        // reservations made
	mu    sync.Mutex
	owner map[string]string // session -> replica
	dead  map[string]bool   // replica -> gone
}

type replicaLeases struct {
	l       *memLeases
	replica string
}

func (r replicaLeases) ClaimSession(_ context.Context, _, session string) error {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.owner[session] = r.replica
	return nil
}

func (r replicaLeases) ReleaseSession(_ context.Context, session string) error {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if r.l.owner[session] == r.replica {
		delete(r.l.owner, session)
	}
	return nil
}

func (r replicaLeases) TenantSessions(_ context.Context, _ string) (int, error) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	n := 0
	for _, o := range r.l.owner {
		if !r.l.dead[o] {
			n++
		}
	}
	return n, nil
}

func (r replicaLeases) ReserveSession(ctx context.Context, tenant string, max int) (string, int, error) {
	r.l.lock.Lock()
	defer r.l.lock.Unlock()
	n, err := r.TenantSessions(ctx, tenant)
	if err != nil || n >= max {
		return "", n, err
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.n++
	id := fmt.Sprintf("_pending.%d", r.l.n)
	r.l.owner[id] = r.replica
	return id, n, nil
}

func (r replicaLeases) ConfirmSession(_ context.Context, _, reservation, session string) error {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	delete(r.l.owner, reservation)
	r.l.owner[session] = r.replica
	return nil
}

func (r replicaLeases) SessionOwner(_ context.Context, session string) (string, bool, bool, error) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	o, ok := r.l.owner[session]
	return o, ok && !r.l.dead[o], ok, nil
}

// TestReplicaSessions: a replica's session ids carry its id; another
// replica answers the session with 421 naming the owner while it lives and
// 404 once it is gone.
func TestReplicaSessions(t *testing.T) {
	l := &memLeases{owner: map[string]string{}, dead: map[string]bool{}}
	a := newWorld(t, func(o *Options, _ *world) { o.Replica, o.Leases = "a", replicaLeases{l, "a"} })
	b := newWorld(t, func(o *Options, _ *world) { o.Replica, o.Leases = "b", replicaLeases{l, "b"} })

	ca := newRaw(t, nil, a.url+"/mcp")
	if st := ca.initialize(); st != http.StatusOK || !strings.HasPrefix(ca.session, "a.") || !validSessionID(ca.session) {
		t.Fatalf("initialize on a: %d, session %q", st, ca.session)
	}
	l.mu.Lock()
	owner := l.owner[ca.session]
	l.mu.Unlock()
	if owner != "a" {
		t.Fatalf("no lease for %s", ca.session)
	}
	cb := newRaw(t, nil, b.url+"/mcp")
	cb.session = ca.session
	res, body := cb.do(http.MethodPost, listBody)
	if res.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, `replica "a"`) {
		t.Fatalf("a's session on b: %s %s, want 421 naming a", res.Status, body)
	}
	l.mu.Lock()
	l.dead["a"] = true
	l.mu.Unlock()
	if res, body := cb.do(http.MethodPost, listBody); res.StatusCode != http.StatusNotFound || !strings.Contains(body, "initialize a new one") {
		t.Fatalf("a's session on b once a is gone: %s %s, want 404", res.Status, body)
	}
	if res, _ := ca.do(http.MethodDelete, ""); res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", res.Status)
	}
	<-a.ended
}

// TestSessionCapAcrossReplicas: mcp.max_sessions_per_tenant counts the
// sessions every live replica holds.
func TestSessionCapAcrossReplicas(t *testing.T) {
	l := &memLeases{owner: map[string]string{}, dead: map[string]bool{}}
	capped := func(replica string) worldOpt {
		return func(o *Options, _ *world) {
			o.Replica, o.Leases, o.MaxSessionsPerTenant = replica, replicaLeases{l, replica}, 2
		}
	}
	a := newWorld(t, capped("a"))
	b := newWorld(t, capped("b"))
	for _, url := range []string{a.url, b.url} {
		if st := newRaw(t, nil, url+"/mcp").initialize(); st != http.StatusOK {
			t.Fatalf("initialize on %s: %d", url, st)
		}
	}
	if st := newRaw(t, nil, b.url+"/mcp").initialize(); st != http.StatusTooManyRequests {
		t.Fatalf("a third session over two replicas: %d, want 429", st)
	}
	l.mu.Lock()
	l.dead["a"] = true
	l.mu.Unlock()
	if st := newRaw(t, nil, b.url+"/mcp").initialize(); st != http.StatusOK {
		t.Fatalf("a session once a's are gone: %d, want 200", st)
	}
}
