package mcpface

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"time"
)

// SessionLeases records which replica serves each MCP session, when
// replicas share a store (core/store's PostgreSQL).
type SessionLeases interface {
	ClaimSession(ctx context.Context, tenant, session string) error
	ReleaseSession(ctx context.Context, session string) error
	// SessionOwner returns the replica holding session's lease and
	// whether it is alive; found is false when none holds it.
	SessionOwner(ctx context.Context, session string) (replica string, live, found bool, err error)
	// TenantSessions counts tenant's sessions held by live replicas, so
	// mcp.max_sessions_per_tenant holds across them.
	TenantSessions(ctx context.Context, tenant string) (int, error)
	// LockTenantSessions is TenantSessions under tenant's session-opening
	// lock, held across replicas until unlock: the count and the new
	// session's claim are then one step.
	LockTenantSessions(ctx context.Context, tenant string) (n int, unlock func(), err error)
}

// leaseTimeout bounds one lease call; a session works without its lease
// (only misrouted requests lose the clear answer), so it never waits long.
const leaseTimeout = 5 * time.Second

// claim records this replica as session's server.
func (t *sessionTable) claim(tenant, session string) {
	if t.leases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
	defer cancel()
	if err := t.leases.ClaimSession(ctx, tenant, session); err != nil {
		t.log.Warn("session lease not recorded", "error", err)
	}
}

// open counts tenant's live sessions: over every replica with leases
// (falling back to this one's count if the store does not answer), else
// this replica's.
func (t *sessionTable) open(ctx context.Context, tenant string) int {
	local := t.count(tenant)
	if t.leases == nil {
		return local
	}
	ctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	n, err := t.leases.TenantSessions(ctx, tenant)
	if err != nil {
		t.log.Warn("count sessions across replicas", "error", err)
		return local
	}
	return max(n, local)
}

// admit counts tenant's live sessions for mcp.max_sessions_per_tenant.
// With hold (a streamable HTTP POST, which creates its session before it
// returns) it also holds the tenant's opening lock, this replica's and
// with leases every replica's, until done, which the caller runs once the
// request is served: racing initializes then see each other's sessions.
// An SSE stream lives as long as its session, so it is counted without
// the lock.
func (t *sessionTable) admit(ctx context.Context, tenant string, hold bool) (n int, done func()) {
	if !hold {
		return t.open(ctx, tenant), func() {}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	mu := &t.opening[h.Sum32()%uint32(len(t.opening))]
	mu.Lock()
	if t.leases == nil {
		return t.count(tenant), mu.Unlock
	}
	ctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	n, unlock, err := t.leases.LockTenantSessions(ctx, tenant)
	if err != nil {
		t.log.Warn("count sessions across replicas", "error", err)
		return t.count(tenant), mu.Unlock
	}
	return max(n, t.count(tenant)), func() {
		unlock()
		mu.Unlock()
	}
}

// release drops session's lease, off the caller's path.
func (t *sessionTable) release(session string) {
	if t.leases == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
		defer cancel()
		if err := t.leases.ReleaseSession(ctx, session); err != nil {
			t.log.Warn("session lease not released", "error", err)
		}
	}()
}

// elsewhere answers a request for a session this replica does not know:
// 421 when a live replica serves it (the proxy routed it wrong: it should
// be sticky on Mcp-Session-Id or its prefix), else 404, which tells the
// client to initialize a new session (the replica that served it is gone).
func (t *sessionTable) elsewhere(ctx context.Context, session string) (int, string) {
	const gone = "session not found: it ended or never existed; initialize a new one"
	if t.leases == nil {
		return http.StatusNotFound, gone
	}
	ctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	replica, live, found, err := t.leases.SessionOwner(ctx, session)
	if err != nil {
		t.log.Warn("session lease lookup failed", "error", err)
		return http.StatusNotFound, gone
	}
	if !found || !live || replica == t.replica {
		if found && !live {
			return http.StatusNotFound, fmt.Sprintf("session not found: replica %q that served it is gone; initialize a new one", replica)
		}
		return http.StatusNotFound, gone
	}
	return http.StatusMisdirectedRequest, fmt.Sprintf("session is served by replica %q, not %q: the load balancer must route on the Mcp-Session-Id header (or its prefix before the first dot)", replica, t.replica)
}
