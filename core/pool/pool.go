// Package pool keeps warm sandboxes per tenant over any sandbox backend.
//
// A sandbox is created for one tenant and only ever handed to that tenant.
// Acquire returns an idle sandbox (after a health check) or creates one;
// Release puts it back, or destroys it when it crashed, timed out or has
// served MaxUses executions. AcquireFresh creates a sandbox for one
// execution only (a cold start) and destroys it on Release.
//
// A background loop keeps each active tenant warm and destroys sandboxes
// idle for longer than IdleTimeout. Warm means Warm idle sandboxes beyond
// the tenant's current leases, and, when the tenant recently ran more
// executions at once than that covers, as many sandboxes as its peak
// concurrency within the last IdleTimeout: a tenant that runs 8 programs at
// a time then finds 8 warm sandboxes instead of paying cold starts whenever
// one is recycled (MaxUses, a crash) or its burst outgrows Warm. The peak
// is forgotten after IdleTimeout without reaching it again, just before the
// sandboxes it kept become idle long enough to be reaped.
//
// When MaxTotal sandboxes exist and none is idle, Acquire waits, at most
// QueueTimeout, for one to be released; released sandboxes (or their
// places) go first to the waiting tenant that holds the fewest, so one
// tenant's burst cannot lock the others out. Past QueueTimeout it fails
// with an error wrapping pluginapi.ErrResourceExhausted.
package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// DefaultHealthCheckAfter is Config.HealthCheckAfter's default. A zygote
// that dies within it, which takes an outside kill, fails the next
// execution with a sandbox error and is recycled.
const DefaultHealthCheckAfter = time.Second

// Backend is the part of a sandbox plugin the pool needs.
type Backend interface {
	Create(ctx context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error)
	Destroy(ctx context.Context, id string) error
	Health(ctx context.Context, id string) error
}

// Config sizes the pool.
type Config struct {
	// Warm is how many idle sandboxes to keep ready per active tenant.
	Warm int
	// MaxTotal bounds the number of sandboxes, busy and idle, of all tenants.
	MaxTotal int
	// IdleTimeout destroys sandboxes unused for this long; a tenant with no
	// execution for this long is no longer kept warm.
	IdleTimeout time.Duration
	// MaxUses recycles a sandbox after this many executions (0: no limit).
	MaxUses int
	// HealthCheckAfter is how long an idle sandbox stays trusted without a
	// health check: one that finished a clean execution (or was created)
	// less than this long ago proved its zygote alive then, and checking
	// again would add a round trip into the sandbox to every warm
	// execution. 0 means DefaultHealthCheckAfter; negative checks before
	// every reuse.
	HealthCheckAfter time.Duration
	// QueueTimeout bounds how long Acquire waits for a sandbox when all
	// are busy; 0 means DefaultQueueTimeout.
	QueueTimeout time.Duration
	// Template returns the create request for a tenant's sandbox (mounts,
	// limits, env). The pool fills in the ID and Tenant.
	Template func(tenant string) (sandbox.CreateRequest, error)
}

type entry struct {
	id       string
	tenant   string
	uses     int
	lastUsed time.Time
	// stale sandboxes belong to a backend incarnation that is gone; they
	// are destroyed on release instead of reused.
	stale bool
	// fresh sandboxes serve one execution and are destroyed on release.
	fresh bool
	// holder is the session whose persistent interpreter the sandbox may
	// hold ("" none; see sessions.go); keeps is set when that interpreter
	// keeps the session's globals (not only FreshGlobals executions ran).
	holder string
	keeps  bool
	// released: the holder's session ended (Pool.EndSession), so the
	// sandbox serves other sessions as one holding no interpreter; the
	// session, continued from another connection, still finds it.
	released bool
}

// free reports whether the sandbox holds no interpreter another session
// should keep away from.
func (e *entry) free() bool { return e.holder == "" || e.released }

// demand is one tenant's recent concurrency, which sizes its warm set.
type demand struct {
	// leased counts the tenant's pooled leases plus on-demand creations
	// for its executions (fresh leases are not pooled and not counted).
	leased int
	// peak is the most leased at once since the window began.
	peak int
	// since is when leased last reached peak; the peak is forgotten
	// IdleTimeout later.
	since time.Time
}

// Pool is safe for concurrent use.
type Pool struct {
	backend Backend
	cfg     Config
	log     hclog.Logger

	mu       sync.Mutex
	idle     map[string][]*entry  // tenant -> idle sandboxes, most recently used last
	busy     map[string]*entry    // id -> leased sandbox
	creating int                  // creations in flight, counted against MaxTotal
	warming  int                  // those of creating that warm (no execution waits on them)
	active   map[string]time.Time // tenant -> last Acquire, for warming
	demand   map[string]*demand   // tenant -> recent concurrency
	closed   bool
	// warmed is closed and replaced whenever a warming creation ends, for
	// Acquire calls that found the pool full only because of them.
	warmed chan struct{}
	// waiters wait for a busy pool (queue.go); seq orders them.
	waiters []*waiter
	seq     uint64
	// lost holds, by tenant and session, why the pool ended a session's
	// persistent interpreter (sessions.go).
	lost map[string]lostSession

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	wg   sync.WaitGroup // background creations and destructions
}

// Lease is one sandbox handed to one execution. Call Release exactly once.
type Lease struct {
	ID     string
	Tenant string
	// Reused is true when the sandbox was warm, false when it was created
	// for this lease.
	Reused bool
	// Lost says, for a persistent execution, why its session's persistent
	// interpreter is gone (its sandbox was stopped, or another session's
	// execution ran there): the program starts without the globals of the
	// session's earlier executions. "" when the pool knows of no loss.
	Lost string
	// Held is true, for a persistent execution, when the sandbox holds the
	// session's interpreter with the globals of its earlier executions.
	// Neither Held nor Lost: the pool knows nothing of them (the session's
	// first persistent execution here, after a restart or on another
	// replica).
	Held bool

	p     *Pool
	e     *entry
	ended bool
	once  sync.Once
}

// New returns a pool over backend and starts its maintenance loop. Call
// Close to destroy every sandbox.
func New(backend Backend, cfg Config, log hclog.Logger) (*Pool, error) {
	if cfg.MaxTotal < 1 {
		return nil, fmt.Errorf("sandbox pool: max_total must be at least 1, got %d", cfg.MaxTotal)
	}
	if cfg.Warm < 0 || cfg.Warm > cfg.MaxTotal {
		return nil, fmt.Errorf("sandbox pool: warm must be between 0 and max_total (%d), got %d", cfg.MaxTotal, cfg.Warm)
	}
	if cfg.Template == nil {
		return nil, errors.New("sandbox pool: no sandbox template")
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.HealthCheckAfter == 0 {
		cfg.HealthCheckAfter = DefaultHealthCheckAfter
	}
	if cfg.QueueTimeout <= 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	p := &Pool{
		backend: backend,
		cfg:     cfg,
		log:     log,
		idle:    map[string][]*entry{},
		busy:    map[string]*entry{},
		active:  map[string]time.Time{},
		demand:  map[string]*demand{},
		lost:    map[string]lostSession{},
		warmed:  make(chan struct{}),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go p.loop()
	return p, nil
}

// Prewarm marks tenant active so the pool keeps Warm sandboxes ready for it
// before its first execution.
func (p *Pool) Prewarm(tenant string) {
	p.mu.Lock()
	p.active[tenant] = time.Now()
	p.mu.Unlock()
	p.poke()
}

// Acquire returns a healthy sandbox for tenant, warm when one is idle, for
// an execution of no particular session.
func (p *Pool) Acquire(ctx context.Context, tenant string) (*Lease, error) {
	return p.AcquireFor(ctx, tenant, Want{})
}

// AcquireFor returns a healthy sandbox for tenant, warm when one suits
// want (see pickIdleLocked): a persistent session's executions go back to
// the sandbox that holds its interpreter. An idle sandbox is
// health-checked first unless it proved itself within HealthCheckAfter.
func (p *Pool) AcquireFor(ctx context.Context, tenant string, want Want) (*Lease, error) {
	w := &waiter{tenant: tenant, want: want}
	deadline := time.Now().Add(p.cfg.QueueTimeout)
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errShutdown()
		}
		p.active[tenant] = time.Now()
		if e := p.popIdleLocked(tenant, want); e != nil {
			p.busy[e.id] = e
			p.leaseLocked(tenant, 1)
			check := p.cfg.HealthCheckAfter < 0 || time.Since(e.lastUsed) >= p.cfg.HealthCheckAfter
			p.mu.Unlock()
			if err := p.health(ctx, e, check); err != nil {
				p.mu.Lock()
				p.leaseLocked(tenant, -1)
				if ctx.Err() == nil {
					p.lostLocked(e, lostSick)
				}
				p.mu.Unlock()
				if ctx.Err() != nil {
					p.putBack(e)
					return nil, ctx.Err()
				}
				p.log.Warn("idle sandbox failed its health check; replacing it", "sandbox", e.id, "error", err)
				p.retire(e)
				continue
			}
			// Claimed once it proved healthy: an execution that never ran
			// there ended no interpreter.
			p.mu.Lock()
			c := p.claimLocked(e, want)
			p.mu.Unlock()
			p.poke()
			return &Lease{ID: e.id, Tenant: tenant, Reused: true, Lost: c.lost, Held: c.held, p: p, e: e}, nil
		}
		if err := p.reserveLocked(); err != nil {
			// A sandbox being warmed will be idle in a moment: this
			// tenant's to use, another's to evict.
			if p.warming > 0 {
				warmed := p.warmed
				p.mu.Unlock()
				select {
				case <-warmed:
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if err := p.wait(ctx, w, deadline, err); err != nil {
				p.mu.Unlock()
				return nil, err
			}
			switch {
			case w.entry != nil:
				e, c := w.entry, w.claim
				p.mu.Unlock()
				p.poke()
				return &Lease{ID: e.id, Tenant: tenant, Reused: true, Lost: c.lost, Held: c.held, p: p, e: e}, nil
			case !w.reserved:
				p.mu.Unlock()
				continue
			}
			w.reserved = false
		}
		// Counted as leased while it is created, so that warming does not
		// build a second sandbox for the same execution.
		p.leaseLocked(tenant, 1)
		p.mu.Unlock()
		p.poke()
		l, err := p.createLease(ctx, tenant, false, want)
		if err != nil {
			p.mu.Lock()
			p.leaseLocked(tenant, -1)
			p.mu.Unlock()
		}
		return l, err
	}
}

// health checks e when check is set; backends without health checks pass.
func (p *Pool) health(ctx context.Context, e *entry, check bool) error {
	if !check {
		return nil
	}
	if err := p.backend.Health(ctx, e.id); err != nil && !errors.Is(err, pluginapi.ErrUnimplemented) {
		return err
	}
	return nil
}

// AcquireFresh creates a sandbox for tenant that serves this lease only
// and is destroyed on Release: a cold start, for executions that must not
// share a zygote with earlier ones and for measuring start-up. It counts
// against MaxTotal like any sandbox, but not towards the tenant's warm
// demand.
func (p *Pool) AcquireFresh(ctx context.Context, tenant string) (*Lease, error) {
	p.mu.Lock()
	w := &waiter{tenant: tenant, fresh: true}
	deadline := time.Now().Add(p.cfg.QueueTimeout)
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, errShutdown()
		}
		err := p.reserveLocked()
		if err == nil {
			break
		}
		if err := p.wait(ctx, w, deadline, err); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		if w.reserved {
			break
		}
	}
	p.mu.Unlock()
	return p.createLease(ctx, tenant, true, Want{})
}

// createLease creates a sandbox in a slot reserved by reserveLocked.
func (p *Pool) createLease(ctx context.Context, tenant string, fresh bool, want Want) (*Lease, error) {
	e, err := p.create(ctx, tenant)
	p.mu.Lock()
	p.creating--
	if err != nil {
		p.wakeLocked()
		p.mu.Unlock()
		return nil, err
	}
	e.fresh = fresh
	p.busy[e.id] = e
	c := p.claimLocked(e, want)
	p.mu.Unlock()
	return &Lease{ID: e.id, Tenant: tenant, Lost: c.lost, p: p, e: e}, nil
}

func errShutdown() error {
	return fmt.Errorf("sandbox pool is shut down: %w", pluginapi.ErrPluginShutdown)
}

// leaseLocked adds n to tenant's leases, recording a new peak.
func (p *Pool) leaseLocked(tenant string, n int) {
	d := p.demand[tenant]
	if d == nil {
		d = &demand{}
		p.demand[tenant] = d
	}
	d.leased += n
	if d.leased >= d.peak {
		d.peak, d.since = d.leased, time.Now()
	}
}

// InterpreterEnded records, before Release, that the session's persistent
// interpreter ended during the execution (sandbox.ExecResult.SessionLost),
// so that the session's next persistent execution is told why its globals
// are gone.
func (l *Lease) InterpreterEnded() { l.ended = true }

// Release returns the sandbox to the pool. healthy is false when the
// execution crashed, timed out or otherwise left the sandbox unfit; it is
// then destroyed and replaced in the background.
func (l *Lease) Release(healthy bool) {
	l.once.Do(func() {
		p := l.p
		p.mu.Lock()
		delete(p.busy, l.e.id)
		if !l.e.fresh {
			p.leaseLocked(l.e.tenant, -1)
		}
		l.e.uses++
		l.e.lastUsed = time.Now()
		switch {
		case l.e.stale:
			p.lostLocked(l.e, lostFlushed)
		case p.closed:
			p.lostLocked(l.e, lostStopping)
		case !healthy:
			p.lostLocked(l.e, lostUnfit)
		case l.ended:
			p.lostLocked(l.e, lostEnded)
		case p.cfg.MaxUses > 0 && l.e.uses >= p.cfg.MaxUses:
			p.lostLocked(l.e, lostMaxUses)
		}
		recycle := !healthy || p.closed || l.e.stale || l.e.fresh || (p.cfg.MaxUses > 0 && l.e.uses >= p.cfg.MaxUses)
		p.giveBackLocked(l.e, recycle)
		p.mu.Unlock()
		p.poke()
	})
}

// Flush destroys every idle sandbox and forgets busy ones, for when the
// backend restarted and its sandboxes died with it. Busy leases may still be
// released; their sandboxes are then destroyed.
func (p *Pool) Flush() {
	p.mu.Lock()
	var drop []*entry
	for t, es := range p.idle {
		for _, e := range es {
			p.lostLocked(e, lostFlushed)
		}
		drop = append(drop, es...)
		delete(p.idle, t)
	}
	for _, e := range p.busy {
		e.stale = true
	}
	p.mu.Unlock()
	for _, e := range drop {
		p.retire(e)
	}
	p.poke()
}

// RemoveTenant destroys every idle sandbox of tenant and marks its busy
// ones to be destroyed when released, and stops warming for it: the
// tenant was removed, and one created again under its id must not find
// the old one's /tmp, processes or host user.
func (p *Pool) RemoveTenant(tenant string) {
	p.mu.Lock()
	drop := p.idle[tenant]
	delete(p.idle, tenant)
	for _, e := range drop {
		p.lostLocked(e, lostStopping)
	}
	for _, e := range p.busy {
		if e.tenant == tenant {
			e.stale = true
		}
	}
	// Its demand stays: busy leases still count in it until released.
	delete(p.active, tenant)
	p.mu.Unlock()
	for _, e := range drop {
		p.retire(e)
	}
}

// Close stops maintenance and destroys every idle sandbox; busy sandboxes
// are destroyed as they are released. It waits for destructions in flight
// until ctx is done.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	// Waiters wake to find the pool shut down.
	for _, w := range p.waiters {
		close(w.ready)
	}
	p.waiters = nil
	var drop []*entry
	for t, es := range p.idle {
		drop = append(drop, es...)
		delete(p.idle, t)
	}
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	for _, e := range drop {
		p.retire(e)
	}
	waited := make(chan struct{})
	go func() { p.wg.Wait(); close(waited) }()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close sandbox pool: %w", ctx.Err())
	}
}

// settle is how long a released sandbox rests before it is preferred
// again: its backend readies the next execution after the last one ends
// (the bwrap zygote forks and warms a spare child), and an execution that
// arrives sooner does that work on its own time. Within settle, back-to-back
// executions alternate between the two most recently used sandboxes.
const settle = 10 * time.Millisecond

// popIdleLocked takes the idle sandbox of tenant that suits want best
// (pickIdleLocked), or nil when a new one should be created.
func (p *Pool) popIdleLocked(tenant string, want Want) *entry {
	es := p.idle[tenant]
	i := p.pickIdleLocked(es, want)
	if i < 0 {
		return nil
	}
	e := es[i]
	p.idle[tenant] = append(es[:i], es[i+1:]...)
	return e
}

func (p *Pool) idleCountLocked() int {
	n := 0
	for _, es := range p.idle {
		n += len(es)
	}
	return n
}

// reserveLocked claims a creation slot, evicting another tenant's idle
// sandbox when the pool is at its maximum. When every sandbox is busy it
// returns the back-pressure error.
func (p *Pool) reserveLocked() error {
	total := len(p.busy) + p.idleCountLocked() + p.creating
	if total < p.cfg.MaxTotal {
		p.creating++
		return nil
	}
	var victim *entry
	for _, es := range p.idle {
		for _, e := range es {
			if victim == nil || e.lastUsed.Before(victim.lastUsed) {
				victim = e
			}
		}
	}
	if victim == nil {
		return p.fullError(total)
	}
	p.lostLocked(victim, lostEvicted)
	es := p.idle[victim.tenant]
	for i, e := range es {
		if e == victim {
			p.idle[victim.tenant] = append(es[:i], es[i+1:]...)
			break
		}
	}
	p.creating++
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.destroy(victim)
	}()
	return nil
}

// putBack returns a sandbox whose acquirer gave up before using it: to a
// waiter, as a release does, else to the idle ones.
func (p *Pool) putBack(e *entry) {
	p.mu.Lock()
	delete(p.busy, e.id)
	p.giveBackLocked(e, false)
	p.mu.Unlock()
}

func (p *Pool) create(ctx context.Context, tenant string) (*entry, error) {
	req, err := p.cfg.Template(tenant)
	if err != nil {
		return nil, fmt.Errorf("prepare sandbox for tenant %s: %w", tenant, err)
	}
	req.ID = newID(tenant)
	req.Tenant = tenant
	diags, err := p.backend.Create(ctx, req)
	if err == nil && diags.HasErrors() {
		err = diags
	}
	if err != nil {
		return nil, fmt.Errorf("create sandbox for tenant %s: %w", tenant, err)
	}
	return &entry{id: req.ID, tenant: tenant, lastUsed: time.Now()}, nil
}

// retire destroys a sandbox in the background.
func (p *Pool) retire(e *entry) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.destroy(e)
	}()
}

func (p *Pool) destroy(e *entry) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.backend.Destroy(ctx, e.id); err != nil && !errors.Is(err, pluginapi.ErrNotFound) {
		p.log.Warn("destroy sandbox", "sandbox", e.id, "error", err)
	}
}

func newID(tenant string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sbx-" + tenant + "-" + hex.EncodeToString(b[:])
}
