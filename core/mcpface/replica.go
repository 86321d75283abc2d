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
	// ReserveSession is TenantSessions and, when fewer than max, a
	// reservation counted as one more session, in one step across
	// replicas; reservation is "" when the tenant is full.
	ReserveSession(ctx context.Context, tenant string, max int) (reservation string, n int, err error)
	// ConfirmSession turns a reservation into session's lease. An unused
	// reservation is dropped with ReleaseSession.
	ConfirmSession(ctx context.Context, tenant, reservation, session string) error
}

// leaseTimeout bounds one lease call; a session works without its lease
// (only misrouted requests lose the clear answer), so it never waits long.
const leaseTimeout = 5 * time.Second

// claim records this replica as session's server, in place of the
// reservation admit made for it, if any.
func (t *sessionTable) claim(tenant, session, reservation string) {
	if t.leases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
	defer cancel()
	var err error
	if reservation != "" {
		err = t.leases.ConfirmSession(ctx, tenant, reservation, session)
	} else {
		err = t.leases.ClaimSession(ctx, tenant, session)
	}
	if err != nil {
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

// admit decides whether tenant may open one more session under max
// (mcp.max_sessions_per_tenant) and returns done, which the caller runs
// once the request is served. With hold (a streamable HTTP POST, which
// creates its session before it returns) the count and the new session
// are one step: with leases a reservation counted across replicas, which
// the session's claim takes over (done drops it if no session came),
// else the tenant's opening lock in this process, held until done. An
// SSE stream lives as long as its session: it is counted, no more.
func (t *sessionTable) admit(ctx context.Context, tenant string, max int, hold bool) (ok bool, reservation string, done func()) {
	if !hold {
		return t.open(ctx, tenant) < max, "", func() {}
	}
	if t.leases != nil {
		rctx, cancel := context.WithTimeout(ctx, leaseTimeout)
		reservation, _, err := t.leases.ReserveSession(rctx, tenant, max)
		cancel()
		if err == nil {
			if reservation == "" {
				return false, "", func() {}
			}
			return t.count(tenant) < max, reservation, func() { t.release(reservation) }
		}
		t.log.Warn("count sessions across replicas; counting this replica's", "error", err)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	mu := &t.opening[h.Sum32()%uint32(len(t.opening))]
	mu.Lock()
	return t.count(tenant) < max, "", mu.Unlock
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
