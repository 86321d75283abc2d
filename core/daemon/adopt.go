package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// sessionLeases is the part of the postgres store that moves a dead
// replica's session here.
type sessionLeases interface {
	AdoptSession(ctx context.Context, tenant, session string) (bool, error)
	ReleaseSession(ctx context.Context, session string) error
}

// sessionAdopter lets a client whose replica died continue its old MCP
// session's PII vault from its new session: execute_code's session
// argument names the old session, whose lease the store moves here only
// when the replica that held it is dead and the tenant is the same. A
// live session's vault stays its own MCP session's alone. A nil
// *sessionAdopter adopts nothing (the files store).
type sessionAdopter struct {
	leases sessionLeases
	log    hclog.Logger

	mu      sync.Mutex
	adopted map[vaultOwner]bool
}

func newSessionAdopter(leases sessionLeases, log hclog.Logger) *sessionAdopter {
	return &sessionAdopter{leases: leases, log: log, adopted: map[vaultOwner]bool{}}
}

// adopt reports whether this replica holds tenant's session, adopting it
// now if its replica is dead.
func (a *sessionAdopter) adopt(ctx context.Context, tenant, session string) bool {
	if a == nil {
		return false
	}
	key := vaultOwner{tenant: tenant, session: session}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.adopted[key] {
		return true
	}
	ok, err := a.leases.AdoptSession(ctx, tenant, session)
	if err != nil {
		a.log.Warn("adopt session", "tenant", tenant, "error", err)
		return false
	}
	if ok {
		a.log.Info("adopted the session of a replica that is gone", "tenant", tenant)
		a.adopted[key] = true
	}
	return ok
}

// release gives up an adopted session once no MCP session here continues
// it: its lease would count against mcp.max_sessions_per_tenant for as
// long as this replica lives.
func (a *sessionAdopter) release(key vaultOwner) {
	if a == nil {
		return
	}
	a.mu.Lock()
	adopted := a.adopted[key]
	delete(a.adopted, key)
	a.mu.Unlock()
	if !adopted {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.leases.ReleaseSession(ctx, key.session); err != nil {
		a.log.Warn("release an adopted session", "tenant", key.tenant, "error", err)
	}
}
