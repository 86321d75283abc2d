package pool

import "time"

// Stats is a snapshot of the pool.
type Stats struct {
	// Idle counts idle sandboxes per tenant (tenants with none omitted).
	Idle     map[string]int
	Busy     int
	Creating int
	MaxTotal int
	// Warm is the configured number of idle sandboxes per active tenant.
	Warm int
	// Targets is, per active tenant, how many sandboxes the pool keeps for
	// it, idle and leased: Warm beyond its leases, or its recent peak of
	// concurrent executions when that is more.
	Targets map[string]int
	// Sandboxes lists every sandbox the pool holds, idle and leased.
	Sandboxes []SandboxStats
}

// SandboxStats describes one sandbox of the pool.
type SandboxStats struct {
	ID     string
	Tenant string
	// Leased is true while an execution holds the sandbox.
	Leased bool
	// Fresh sandboxes serve one execution (AcquireFresh).
	Fresh bool
	// Uses counts the executions the sandbox has finished.
	Uses     int
	LastUsed time.Time
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Idle: map[string]int{}, Busy: len(p.busy), Creating: p.creating, MaxTotal: p.cfg.MaxTotal,
		Warm: p.cfg.Warm, Targets: map[string]int{}}
	for t, es := range p.idle {
		if len(es) > 0 {
			s.Idle[t] = len(es)
		}
		for _, e := range es {
			s.Sandboxes = append(s.Sandboxes, e.stats(false))
		}
	}
	for _, e := range p.busy {
		s.Sandboxes = append(s.Sandboxes, e.stats(true))
	}
	for t := range p.active {
		s.Targets[t] = p.targetLocked(t)
	}
	return s
}

func (e *entry) stats(leased bool) SandboxStats {
	return SandboxStats{ID: e.id, Tenant: e.tenant, Leased: leased, Fresh: e.fresh, Uses: e.uses, LastUsed: e.lastUsed}
}
