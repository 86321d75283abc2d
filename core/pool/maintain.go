package pool

import (
	"context"
	"time"
)

// poke wakes the maintenance loop, without waiting when it is busy.
func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// loop keeps active tenants warm and reaps idle sandboxes.
func (p *Pool) loop() {
	defer close(p.done)
	tick := time.NewTicker(min(p.cfg.IdleTimeout/4, 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
		case <-tick.C:
		}
		p.reap()
		p.warm()
	}
}

func (p *Pool) reap() {
	now := time.Now()
	var drop []*entry
	p.mu.Lock()
	// Peaks are forgotten first: the sandboxes a peak kept were released
	// after it, so they are reaped in a later pass, not rebuilt by warm.
	for t, d := range p.demand {
		if now.Sub(d.since) > p.cfg.IdleTimeout {
			d.peak, d.since = d.leased, now
		}
		if d.leased == 0 && d.peak == 0 {
			delete(p.demand, t)
		}
	}
	for t, es := range p.idle {
		kept := es[:0]
		for _, e := range es {
			if now.Sub(e.lastUsed) > p.cfg.IdleTimeout {
				p.lostLocked(e, lostIdle)
				drop = append(drop, e)
			} else {
				kept = append(kept, e)
			}
		}
		p.idle[t] = kept
	}
	for t, last := range p.active {
		if now.Sub(last) > p.cfg.IdleTimeout {
			delete(p.active, t)
		}
	}
	p.mu.Unlock()
	for _, e := range drop {
		p.retire(e)
	}
}

// warm creates sandboxes, one at a time, until every active tenant has its
// target (see targetLocked) or the pool is full. Creations run outside the
// lock so that executions are never held up by warming.
func (p *Pool) warm() {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		tenant := ""
		for t := range p.active {
			leased := 0
			if d := p.demand[t]; d != nil {
				leased = d.leased
			}
			if len(p.idle[t])+leased < p.targetLocked(t) {
				tenant = t
				break
			}
		}
		if tenant == "" || len(p.busy)+p.idleCountLocked()+p.creating >= p.cfg.MaxTotal {
			p.mu.Unlock()
			return
		}
		p.creating++
		p.warming++
		p.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		e, err := p.create(ctx, tenant)
		cancel()
		p.mu.Lock()
		p.creating--
		p.warming--
		close(p.warmed)
		p.warmed = make(chan struct{})
		// The new sandbox (or the slot of one that failed) may serve a
		// waiter instead: idle, it is the waiter's to take or evict.
		p.wakeLocked()
		if err == nil {
			if p.closed {
				p.mu.Unlock()
				p.retire(e)
				return
			}
			p.idle[tenant] = append(p.idle[tenant], e)
		}
		p.mu.Unlock()
		if err != nil {
			p.log.Warn("warm sandbox", "tenant", tenant, "error", err)
			return
		}
	}
}

// targetLocked is how many sandboxes, idle and leased, tenant should have.
func (p *Pool) targetLocked(tenant string) int {
	leased, peak := 0, 0
	if d := p.demand[tenant]; d != nil {
		leased, peak = d.leased, d.peak
	}
	return max(p.cfg.Warm+leased, peak)
}
