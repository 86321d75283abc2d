package catalog

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
)

// InstanceStatus is a snapshot of one tenant's instance of a tenant-scoped
// server.
type InstanceStatus struct {
	Tenant string
	State  State
	// PID is the stdio server's process id while it runs, else 0.
	PID int
	// StartedAt is when the instance was started; ConnectedAt when its
	// current connection was made.
	StartedAt   time.Time
	ConnectedAt time.Time
	// LastUsed is when the last call began or ended.
	LastUsed time.Time
	// InFlight counts calls under way; an instance with none is idle.
	InFlight  int
	Restarts  int
	LastError string
	// StrayLines and LastStrayLine: as in ServerStatus, for this instance.
	StrayLines    int
	LastStrayLine string
	lastStrayAt   time.Time
	// What the instance's server reported on its current (or last)
	// connection.
	ProtocolVersion, ServerName, ServerVersion string
}

// tenants runs the instances of one tenant-scoped server: one upstream per
// tenant, started by its first call, stopped after idle_timeout without
// calls or to make room under max_instances. The tool list (and so the
// stubs) is the server's, not a tenant's: every instance installs what it
// lists under the server's name.
type tenants struct {
	cat *Catalog
	cfg *config.MCPServer

	mu        sync.Mutex
	instances map[string]*instance
	closed    bool
	// wg counts the instances' supervisors, waited for at close.
	wg sync.WaitGroup
}

// instance is one tenant's upstream and its use.
type instance struct {
	tenant    string
	up        *upstream
	stop      context.CancelFunc
	startedAt time.Time
	// Guarded by tenants.mu.
	inFlight int
	lastUsed time.Time
}

func newTenants(cat *Catalog, s *config.MCPServer) *tenants {
	// Loading sets both; a server built in code may not.
	if s.IdleTimeout <= 0 || s.MaxInstances <= 0 {
		c := *s
		c.IdleTimeout = cmp.Or(max(c.IdleTimeout, 0), config.DefaultServerIdleTimeout)
		c.MaxInstances = cmp.Or(max(c.MaxInstances, 0), config.DefaultMaxInstances)
		s = &c
	}
	return &tenants{cat: cat, cfg: s, instances: map[string]*instance{}}
}

// acquire returns tenant's instance, starting it if it does not run, and
// counts a call on it until release. The instance may still be
// connecting: its upstream's ready waits for it. Concurrent first calls of
// a tenant share one instance.
func (p *tenants) acquire(tenant string) (_ *instance, release func(), _ error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, fmt.Errorf("%w: server %s: catalog closed", ErrUnavailable, p.cfg.Name)
	}
	in := p.instances[tenant]
	if in == nil {
		if len(p.instances) >= p.cfg.MaxInstances && !p.evictLocked() {
			return nil, nil, fmt.Errorf("%w: server %s already runs max_instances (%d) instances, all busy with calls of other tenants",
				ErrUnavailable, p.cfg.Name, p.cfg.MaxInstances)
		}
		var err error
		if in, err = p.startLocked(tenant); err != nil {
			return nil, nil, fmt.Errorf("%w: start %s for tenant %s: %w", ErrUnavailable, p.cfg.Name, tenant, err)
		}
	}
	in.inFlight++
	in.lastUsed = time.Now()
	var once sync.Once
	return in, func() {
		once.Do(func() {
			p.mu.Lock()
			in.inFlight--
			in.lastUsed = time.Now()
			p.mu.Unlock()
		})
	}, nil
}

// startLocked starts tenant's instance: its config evaluated for the
// tenant, its data folder created private to cexecd.
func (p *tenants) startLocked(tenant string) (*instance, error) {
	s, err := p.cat.cfg.ServerForTenant(p.cfg.Name, tenant)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.cat.cfg.TenantServerDir(tenant, p.cfg.Name), 0o700); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	up := newUpstream(p.cat, s)
	up.tenant = tenant
	up.log = up.log.With("tenant", tenant)
	ctx, stop := context.WithCancel(p.cat.life)
	in := &instance{tenant: tenant, up: up, stop: stop, startedAt: time.Now()}
	p.instances[tenant] = in
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		up.run(ctx)
	}()
	up.log.Info("instance started")
	return in, nil
}

// evictLocked stops the least recently used idle instance to make room,
// reporting whether there was one.
func (p *tenants) evictLocked() bool {
	var lru *instance
	for _, in := range p.instances {
		if in.inFlight == 0 && (lru == nil || in.lastUsed.Before(lru.lastUsed)) {
			lru = in
		}
	}
	if lru == nil {
		return false
	}
	lru.up.log.Info("instance stopped to make room under max_instances", "max_instances", p.cfg.MaxInstances)
	p.stopLocked(lru)
	return true
}

// stopLocked ends an instance; a stdio server's process is stopped by its
// connection's close.
func (p *tenants) stopLocked(in *instance) {
	delete(p.instances, in.tenant)
	in.stop()
}

// remove stops tenant's instance, if it runs; calls in flight on it fail
// as on a crash.
func (p *tenants) remove(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.instances[tenant]; in != nil {
		in.up.log.Info("instance stopped: its tenant was removed")
		p.stopLocked(in)
	}
}

// reapIdle stops every instance idle for idle_timeout. While the server's
// tools are not known yet (known false) nothing is stopped, so the
// instance discovering them keeps trying.
func (p *tenants) reapIdle(now time.Time, known bool) {
	if !known {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, in := range p.instances {
		if in.inFlight == 0 && now.Sub(in.lastUsed) >= p.cfg.IdleTimeout {
			in.up.log.Info("instance stopped after idle_timeout", "idle_timeout", p.cfg.IdleTimeout)
			p.stopLocked(in)
		}
	}
}

// run discovers the server's tools through the default tenant's instance,
// then stops idle instances until ctx ends, when it stops them all.
func (p *tenants) run(ctx context.Context, u *upstream) {
	in, release, err := p.acquire(endpoint.DefaultTenant)
	if err != nil {
		u.log.Warn("could not start the default tenant's instance, which lists the tools", "error", err)
		u.firstDone(err)
	} else {
		select {
		case <-in.up.first:
			u.firstDone(in.up.firstErr)
		case <-ctx.Done():
			u.firstDone(fmt.Errorf("catalog closed: %w", ctx.Err()))
		}
		release()
	}
	tick := time.NewTicker(reapEvery(p.cfg.IdleTimeout))
	defer tick.Stop()
	for {
		select {
		case now := <-tick.C:
			p.reapIdle(now, p.cat.toolsKnown(p.cfg.Name))
		case <-ctx.Done():
			p.mu.Lock()
			p.closed = true
			for _, in := range p.instances {
				p.stopLocked(in)
			}
			p.mu.Unlock()
			p.wg.Wait()
			return
		}
	}
}

// reapEvery is how often idle instances are looked for: a fraction of
// idle_timeout, so an instance lives at most a quarter longer than it.
func reapEvery(idle time.Duration) time.Duration {
	return min(max(idle/4, 5*time.Millisecond), 30*time.Second)
}

// status returns the status of every running instance, by tenant.
func (p *tenants) status() []InstanceStatus {
	p.mu.Lock()
	out := make([]InstanceStatus, 0, len(p.instances))
	ups := make([]*upstream, 0, len(p.instances))
	for _, in := range p.instances {
		out = append(out, InstanceStatus{Tenant: in.tenant, StartedAt: in.startedAt, InFlight: in.inFlight, LastUsed: in.lastUsed})
		ups = append(ups, in.up)
	}
	p.mu.Unlock()
	// Each upstream's own lock, outside ours: calls never wait on status.
	for i, up := range ups {
		st := up.status()
		out[i].State, out[i].PID, out[i].ConnectedAt, out[i].Restarts, out[i].LastError = st.State, st.PID, st.ConnectedAt, st.Restarts, st.LastError
		out[i].ProtocolVersion, out[i].ServerName, out[i].ServerVersion = st.ProtocolVersion, st.ServerName, st.ServerVersion
		out[i].StrayLines, out[i].LastStrayLine, out[i].lastStrayAt = st.StrayLines, st.LastStrayLine, st.lastStrayAt
	}
	slices.SortFunc(out, func(a, b InstanceStatus) int { return strings.Compare(a.Tenant, b.Tenant) })
	return out
}
