package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// DefaultQueueTimeout is Config.QueueTimeout's default.
const DefaultQueueTimeout = 30 * time.Second

// waiter is an Acquire waiting for a sandbox while every one is busy.
// Sandboxes freed meanwhile go to the waiter whose tenant holds the fewest,
// so that one tenant's burst cannot keep the others out: it gets the pool
// while nobody else wants it, and gives it back one execution at a time.
type waiter struct {
	tenant string
	want   Want
	fresh  bool // AcquireFresh: needs a creation slot, not a warm sandbox
	seq    uint64
	ready  chan struct{}
	// What the waiter was given, set under Pool.mu before ready closes:
	// the freed sandbox itself (same tenant), a creation slot counted in
	// Pool.creating, or neither (capacity freed elsewhere: try again).
	entry    *entry
	reserved bool
	// claim is claimLocked's answer for entry.
	claim claim
}

// wait queues w (new, or woken with nothing) and waits, with p.mu released,
// until it is given something, deadline passes or ctx ends. It is called
// and returns with p.mu held; full is the error that sent it here.
func (p *Pool) wait(ctx context.Context, w *waiter, deadline time.Time, full error) error {
	if w.seq == 0 {
		p.seq++
		w.seq = p.seq
	}
	w.ready = make(chan struct{})
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("waited %s: %w", p.cfg.QueueTimeout, full)
	}
	p.mu.Lock()
	if err == nil {
		return nil
	}
	if !p.dropWaiterLocked(w) {
		// Given something just as it gave up: pass it on.
		p.regiveLocked(w)
	}
	return err
}

// dropWaiterLocked removes w from the queue; false when it was taken
// from it already (given something).
func (p *Pool) dropWaiterLocked(w *waiter) bool {
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// nextWaiterLocked takes the waiter to serve first off the queue: of the
// tenant holding the fewest sandboxes, the longest waiting.
func (p *Pool) nextWaiterLocked() *waiter {
	best := -1
	for i, w := range p.waiters {
		if best < 0 || p.leasedLocked(w.tenant) < p.leasedLocked(p.waiters[best].tenant) ||
			p.leasedLocked(w.tenant) == p.leasedLocked(p.waiters[best].tenant) && w.seq < p.waiters[best].seq {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	w := p.waiters[best]
	p.waiters = append(p.waiters[:best], p.waiters[best+1:]...)
	return w
}

func (p *Pool) leasedLocked(tenant string) int {
	if d := p.demand[tenant]; d != nil {
		return d.leased
	}
	return 0
}

// handOffLocked gives a released sandbox, or its place, to the next
// waiter. It reports whether e was taken (handed over whole) and whether
// it must be destroyed: its slot went to a waiter of another tenant, or
// one that needs a fresh sandbox.
func (p *Pool) handOffLocked(e *entry, recycle bool) (taken, destroy bool) {
	if p.closed {
		return false, recycle
	}
	w := p.nextWaiterLocked()
	if w == nil {
		return false, recycle
	}
	defer close(w.ready)
	if !recycle && !w.fresh && w.tenant == e.tenant {
		p.busy[e.id] = e
		p.leaseLocked(w.tenant, 1)
		w.entry, w.claim = e, p.claimLocked(e, w.want)
		return true, false
	}
	p.lostLocked(e, lostEvicted)
	p.creating++
	w.reserved = true
	return false, true
}

// giveBackLocked passes a sandbox that is free again to the next waiter,
// or its place when the waiter needs another (or recycle says it is not to
// be used again, when it is destroyed), else keeps it idle.
func (p *Pool) giveBackLocked(e *entry, recycle bool) {
	taken, destroy := p.handOffLocked(e, recycle)
	switch {
	case destroy:
		p.retire(e)
	case !taken:
		p.idle[e.tenant] = append(p.idle[e.tenant], e)
	}
}

// regiveLocked passes on what a waiter that gave up was given: a
// sandbox, a creation slot, or only the news that capacity was freed.
func (p *Pool) regiveLocked(w *waiter) {
	switch {
	case w.entry != nil:
		e := w.entry
		w.entry = nil
		delete(p.busy, e.id)
		p.leaseLocked(w.tenant, -1)
		p.giveBackLocked(e, false)
	case w.reserved:
		w.reserved = false
		p.creating--
		p.wakeLocked()
	default:
		p.wakeLocked()
	}
}

// wakeLocked tells the next waiter that capacity was freed (a sandbox
// destroyed, a creation failed), for it to try again.
func (p *Pool) wakeLocked() {
	if w := p.nextWaiterLocked(); w != nil {
		close(w.ready)
	}
}

// fullError is reserveLocked's error for a pool whose sandboxes are all busy.
func (p *Pool) fullError(total int) error {
	return fmt.Errorf("sandbox pool is full: %d of %d sandboxes are busy (%d starting); retry later or raise sandbox.pool.max_total: %w",
		total, p.cfg.MaxTotal, p.creating, pluginapi.ErrResourceExhausted)
}
