package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// memBackend records sandboxes in memory. The pool's contract with real
// backends is covered end to end with sandbox-bwrap; this checks the pool's
// own bookkeeping.
type memBackend struct {
	mu        sync.Mutex
	live      map[string]string // id -> tenant
	created   int
	destroyed int
	unhealthy map[string]bool
	failNext  error
	checks    int
	// gate, when set, holds every Create until it is closed.
	gate chan struct{}
}

func newMem() *memBackend {
	return &memBackend{live: map[string]string{}, unhealthy: map[string]bool{}}
}

func (m *memBackend) Create(_ context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	m.mu.Lock()
	gate := m.gate
	m.mu.Unlock()
	if gate != nil {
		<-gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failNext; err != nil {
		m.failNext = nil
		return nil, err
	}
	m.live[req.ID] = req.Tenant
	m.created++
	return nil, nil
}

func (m *memBackend) Destroy(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; !ok {
		return pluginapi.ErrNotFound
	}
	delete(m.live, id)
	m.destroyed++
	return nil
}

func (m *memBackend) Health(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks++
	if m.unhealthy[id] {
		return errors.New("zygote gone")
	}
	return nil
}

func (m *memBackend) isLive(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.live[id]
	return ok
}

func (m *memBackend) liveCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

func newPool(t *testing.T, b Backend, cfg Config) *Pool {
	t.Helper()
	cfg.Template = func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }
	p, err := New(b, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// waitFor gives cond 30 s: the pool reaches its state in milliseconds, but
// race-detector builds on a loaded 2-core machine have taken over 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leased returns the lease of an acquisition, failing t when it failed:
// leased(t)(p.Acquire(ctx, tenant)).
func leased(t testing.TB) func(*Lease, error) *Lease {
	return func(l *Lease, err error) *Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tmpl := func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"zero max", Config{MaxTotal: 0, Template: tmpl}},
		{"warm above max", Config{MaxTotal: 2, Warm: 3, Template: tmpl}},
		{"no template", Config{MaxTotal: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(newMem(), tc.cfg, nil); err == nil {
				t.Fatal("want error")
			}
		})
	}
}

func TestReuseAndTenantIsolation(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 4})
	ctx := context.Background()

	a1 := leased(t)(p.Acquire(ctx, "alice"))
	if a1.Reused {
		t.Fatal("first lease cannot be warm")
	}
	a1.Release(true)

	bob := leased(t)(p.Acquire(ctx, "bob"))
	if bob.ID == a1.ID {
		t.Fatal("alice's sandbox was handed to bob")
	}
	bob.Release(true)

	a2 := leased(t)(p.Acquire(ctx, "alice"))
	if a2.ID != a1.ID || !a2.Reused {
		t.Fatalf("alice got %s (reused %v), want her warm %s", a2.ID, a2.Reused, a1.ID)
	}
	a2.Release(true)
}

func TestRecycling(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxUses int
		uses    int
		healthy bool
		reused  bool
	}{
		{"healthy is reused", 0, 1, true, true},
		{"crash recycles", 0, 1, false, false},
		{"max uses recycles", 2, 2, true, false},
		{"below max uses is reused", 3, 2, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMem()
			p := newPool(t, b, Config{MaxTotal: 2, MaxUses: tc.maxUses})
			ctx := context.Background()
			var first string
			for i := 0; i < tc.uses; i++ {
				l := leased(t)(p.Acquire(ctx, "t"))
				if first == "" {
					first = l.ID
				}
				l.Release(i < tc.uses-1 || tc.healthy)
			}
			l := leased(t)(p.Acquire(ctx, "t"))
			defer l.Release(true)
			if got := l.ID == first; got != tc.reused {
				t.Fatalf("reused = %v, want %v", got, tc.reused)
			}
			if !tc.reused {
				// The pool may build a replacement in the background (the
				// tenant's peak demand was one sandbox); the recycled one
				// must be gone.
				waitFor(t, "recycled sandbox destroyed", func() bool { return !b.isLive(first) })
			}
		})
	}
}

func TestHealthCheckReplacesBrokenSandbox(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 2, HealthCheckAfter: -1})
	ctx := context.Background()
	l, _ := p.Acquire(ctx, "t")
	broken := l.ID
	l.Release(true)
	b.mu.Lock()
	b.unhealthy[broken] = true
	b.mu.Unlock()

	l2 := leased(t)(p.Acquire(ctx, "t"))
	defer l2.Release(true)
	if l2.ID == broken {
		t.Fatal("handed out a sandbox that failed its health check")
	}
}

func TestBackPressure(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 2, QueueTimeout: 20 * time.Millisecond})
	ctx := context.Background()
	l1, _ := p.Acquire(ctx, "t")
	l2, _ := p.Acquire(ctx, "t")
	_, err := p.Acquire(ctx, "t")
	if !errors.Is(err, pluginapi.ErrResourceExhausted) || !strings.HasPrefix(err.Error(), "waited 20ms: sandbox pool is full: 2 of 2") {
		t.Fatalf("err = %v, want ErrResourceExhausted after the wait", err)
	}
	l1.Release(true)
	l3, err := p.Acquire(ctx, "t")
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	l2.Release(true)
	l3.Release(true)
}

func TestFullPoolEvictsOtherTenantsIdle(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 1})
	ctx := context.Background()
	a, _ := p.Acquire(ctx, "alice")
	a.Release(true)
	bob, err := p.Acquire(ctx, "bob")
	if err != nil {
		t.Fatalf("bob blocked by alice's idle sandbox: %v", err)
	}
	bob.Release(true)
	waitFor(t, "alice's idle sandbox evicted", func() bool { return b.liveCount() == 1 })
}

func TestWarmAndIdleTimeout(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 4, Warm: 2, IdleTimeout: 200 * time.Millisecond})
	p.Prewarm("t")
	waitFor(t, "two warm sandboxes", func() bool { return p.Stats().Idle["t"] == 2 })
	waitFor(t, "idle sandboxes reaped", func() bool { return b.liveCount() == 0 })
}

func TestCreateFailureIsReported(t *testing.T) {
	b := newMem()
	b.failNext = fmt.Errorf("bwrap: %w", pluginapi.ErrUnavailable)
	p := newPool(t, b, Config{MaxTotal: 1})
	_, err := p.Acquire(context.Background(), "t")
	if !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Fatalf("err = %v, want the backend's error", err)
	}
	l, err := p.Acquire(context.Background(), "t")
	if err != nil {
		t.Fatalf("slot leaked after a failed create: %v", err)
	}
	l.Release(true)
}

func TestFlushAndClose(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 3})
	ctx := context.Background()
	idle, _ := p.Acquire(ctx, "t")
	busy, _ := p.Acquire(ctx, "t")
	idle.Release(true)
	p.Flush()
	busy.Release(true)
	// The pool refills to the tenant's recent demand; the flushed
	// sandboxes themselves must be gone.
	waitFor(t, "flushed sandboxes destroyed", func() bool { return !b.isLive(idle.ID) && !b.isLive(busy.ID) })

	l, _ := p.Acquire(ctx, "t")
	l.Release(true)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.liveCount(); n != 0 {
		t.Fatalf("%d sandboxes left after Close", n)
	}
	if _, err := p.Acquire(ctx, "t"); !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Fatalf("Acquire after Close: %v", err)
	}
}

func TestConcurrentLeasesNeverShared(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 8, Warm: 2})
	ctx := context.Background()
	var mu sync.Mutex
	inUse := map[string]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			tenant := fmt.Sprintf("t%d", w%2)
			for i := 0; i < 50; i++ {
				l, err := p.Acquire(ctx, tenant)
				if err != nil {
					continue // back-pressure is allowed under contention
				}
				mu.Lock()
				if inUse[l.ID] {
					t.Errorf("sandbox %s leased twice", l.ID)
				}
				inUse[l.ID] = true
				mu.Unlock()
				b.mu.Lock()
				owner := b.live[l.ID]
				b.mu.Unlock()
				if owner != tenant {
					t.Errorf("tenant %s got %s's sandbox", tenant, owner)
				}
				mu.Lock()
				delete(inUse, l.ID)
				mu.Unlock()
				l.Release(true)
			}
		}(w)
	}
	wg.Wait()
}

func TestAcquireFresh(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 2, Warm: 1, QueueTimeout: 20 * time.Millisecond})
	ctx := context.Background()
	warm := leased(t)(p.Acquire(ctx, "t"))
	// The warmer keeps one idle sandbox beyond the lease: once released,
	// two are idle and the pool is full, so the first fresh lease evicts
	// one. (The test used to race the warmer, waiting for one idle.)
	waitFor(t, "a warm sandbox beside the lease", func() bool { return p.Stats().Idle["t"] == 1 })
	warm.Release(true)
	if st := p.Stats(); st.Idle["t"] != 2 {
		t.Fatalf("after the release: %+v", st)
	}

	seen := map[string]bool{warm.ID: true}
	for range 3 {
		l := leased(t)(p.AcquireFresh(ctx, "t"))
		if l.Reused || seen[l.ID] {
			t.Fatalf("fresh lease %s is a sandbox used before (reused %v)", l.ID, l.Reused)
		}
		seen[l.ID] = true
		st := p.Stats()
		if st.Busy != 1 || len(st.Sandboxes) != 2 {
			t.Fatalf("stats with a fresh lease: %+v", st)
		}
		l.Release(true)
		waitFor(t, "fresh sandbox destroyed on release", func() bool { return !b.isLive(l.ID) })
	}
	if st := p.Stats(); st.Idle["t"] != 1 || st.Targets["t"] != 1 {
		t.Fatalf("fresh leases changed the warm set: %+v", st)
	}

	// A fresh sandbox takes a slot like any other.
	l1, _ := p.AcquireFresh(ctx, "t")
	l2, _ := p.Acquire(ctx, "t")
	if _, err := p.AcquireFresh(ctx, "t"); !errors.Is(err, pluginapi.ErrResourceExhausted) {
		t.Fatalf("fresh lease beyond max_total: %v", err)
	}
	l1.Release(true)
	l2.Release(true)
}

func TestWarmFollowsPeakConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name      string
		warm, max int
		peak      int
		want      int // sandboxes kept after the burst
	}{
		{"peak above warm", 1, 8, 4, 4},
		{"peak below warm", 3, 8, 2, 3},
		{"peak capped by max_total", 1, 3, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMem()
			idle := 300 * time.Millisecond
			p := newPool(t, b, Config{MaxTotal: tc.max, Warm: tc.warm, IdleTimeout: idle})
			ctx := context.Background()
			var leases []*Lease
			for range tc.peak {
				l := leased(t)(p.Acquire(ctx, "t"))
				leases = append(leases, l)
			}
			burst := max(tc.warm+tc.peak, tc.peak)
			if got := p.Stats().Targets["t"]; got != burst {
				t.Fatalf("target during the burst = %d", got)
			}
			// Recycle one: the pool replaces it to keep the peak warm.
			leases[0].Release(false)
			for _, l := range leases[1:] {
				l.Release(true)
			}
			// At least the target is kept warm. Sandboxes the warmer made
			// for the burst while it lasted stay until the idle timeout
			// reaps them, so up to the burst's target may be idle.
			waitFor(t, fmt.Sprintf("%d to %d warm sandboxes", tc.want, burst), func() bool {
				st := p.Stats()
				idle := st.Idle["t"]
				return idle >= tc.want && idle <= burst && st.Creating == 0 && b.liveCount() == idle
			})
			if got := p.Stats().Targets["t"]; got != tc.want {
				t.Fatalf("target after the burst = %d, want %d", got, tc.want)
			}
			// Without executions the peak is forgotten and idle sandboxes
			// reaped.
			waitFor(t, "idle sandboxes reaped", func() bool { return b.liveCount() == 0 })
		})
	}
}

func TestStatsListsSandboxes(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 3})
	ctx := context.Background()
	a, _ := p.Acquire(ctx, "alice")
	bob, _ := p.Acquire(ctx, "bob")
	bob.Release(true)
	st := p.Stats()
	got := map[string]SandboxStats{}
	for _, s := range st.Sandboxes {
		got[s.ID] = s
	}
	if s := got[a.ID]; !s.Leased || s.Tenant != "alice" || s.Uses != 0 {
		t.Errorf("alice's leased sandbox: %+v", s)
	}
	if s := got[bob.ID]; s.Leased || s.Tenant != "bob" || s.Uses != 1 || s.LastUsed.IsZero() {
		t.Errorf("bob's idle sandbox: %+v", s)
	}
	if len(got) != 2 || st.Busy != 1 || st.Idle["bob"] != 1 || st.MaxTotal != 3 {
		t.Errorf("stats: %+v", st)
	}
	a.Release(true)
}

func TestHealthCheckAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		after      time.Duration
		pause      time.Duration
		wantChecks int
	}{
		{"always", -1, 0, 3},
		{"trusted right after a clean run", time.Hour, 0, 0},
		{"checked once idle for a while", 20 * time.Millisecond, 40 * time.Millisecond, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMem()
			p := newPool(t, b, Config{MaxTotal: 1, HealthCheckAfter: tc.after})
			ctx := context.Background()
			l := leased(t)(p.Acquire(ctx, "t"))
			l.Release(true)
			for range 3 {
				time.Sleep(tc.pause)
				l, err := p.Acquire(ctx, "t")
				if err != nil || !l.Reused {
					t.Fatalf("reuse: %v (reused %v)", err, l != nil && l.Reused)
				}
				l.Release(true)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.checks != tc.wantChecks {
				t.Fatalf("%d health checks, want %d", b.checks, tc.wantChecks)
			}
		})
	}
}

// TestAcquireWaitsForWarming: a pool full only of sandboxes being warmed
// is not full for long; Acquire waits for them instead of failing.
func TestAcquireWaitsForWarming(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tenant string
		reused bool
	}{
		{"same tenant gets the warmed sandbox", "t", true},
		{"another tenant evicts it", "u", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMem()
			b.gate = make(chan struct{})
			p := newPool(t, b, Config{MaxTotal: 1, Warm: 1})
			p.Prewarm("t")
			waitFor(t, "warming under way", func() bool { return p.Stats().Creating == 1 })

			got := make(chan error, 1)
			var l *Lease
			go func() {
				var err error
				l, err = p.Acquire(context.Background(), tc.tenant)
				got <- err
			}()
			select {
			case err := <-got:
				t.Fatalf("Acquire returned while the only sandbox was warming: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			b.mu.Lock()
			close(b.gate)
			b.gate = nil
			b.mu.Unlock()
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			if l.Reused != tc.reused || l.Tenant != tc.tenant {
				t.Fatalf("lease %+v, want reused %v", l, tc.reused)
			}
			l.Release(true)
		})
	}
	// A pool full of busy sandboxes fails after its queue timeout, saying so.
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 1, QueueTimeout: 20 * time.Millisecond})
	l, err := p.Acquire(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(true)
	_, err = p.Acquire(context.Background(), "t")
	if !errors.Is(err, pluginapi.ErrResourceExhausted) || !strings.Contains(err.Error(), "sandbox pool is full: 1 of 1 sandboxes are busy (0 starting)") {
		t.Fatalf("full pool: %v", err)
	}
}

// TestRestedSandboxPreferred: an execution right after another goes to the
// sandbox before the most recently used one, which has had time to ready
// its next execution; an execution after settle takes the most recently
// used one, and so does a persistent session's, whose interpreter is there.
func TestRestedSandboxPreferred(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wait    time.Duration
		want    Want
		wantMRU bool
	}{
		{name: "back to back", wantMRU: false},
		{name: "back to back, persistent", want: Want{Session: "s", Persistent: true}, wantMRU: true},
		{name: "after settle", wait: 2 * settle, wantMRU: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, newMem(), Config{MaxTotal: 4})
			ctx := context.Background()
			first := leased(t)(p.Acquire(ctx, "alice"))
			second := leased(t)(p.AcquireFor(ctx, "alice", tc.want))
			first.Release(true)
			second.Release(true) // the most recently used
			time.Sleep(tc.wait)
			l, err := p.AcquireFor(ctx, "alice", tc.want)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(true)
			if got := l.ID == second.ID; got != tc.wantMRU || !l.Reused {
				t.Errorf("got %s (reused %v); first %s, most recently used %s; want the most recently used: %v", l.ID, l.Reused, first.ID, second.ID, tc.wantMRU)
			}
		})
	}
}

// TestRemoveTenant destroys a removed tenant's idle sandboxes at once and
// its busy ones on release, leaves other tenants' alone, and gives a
// tenant created again under the same id only new sandboxes.
func TestRemoveTenant(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 6, Warm: 1})
	ctx := context.Background()
	idle := leased(t)(p.Acquire(ctx, "gone"))
	busy := leased(t)(p.Acquire(ctx, "gone"))
	other := leased(t)(p.Acquire(ctx, "stays"))
	idle.Release(true)
	other.Release(true)

	p.RemoveTenant("gone")
	waitFor(t, "the removed tenant's idle sandbox destroyed", func() bool { return !b.isLive(idle.ID) })
	if !b.isLive(busy.ID) {
		t.Fatal("a busy sandbox was destroyed under its execution")
	}
	busy.Release(true)
	waitFor(t, "the removed tenant's busy sandbox destroyed on release", func() bool { return !b.isLive(busy.ID) })
	if !b.isLive(other.ID) {
		t.Error("another tenant's sandbox was destroyed")
	}

	again := leased(t)(p.Acquire(ctx, "gone"))
	defer again.Release(true)
	if again.Reused || again.ID == idle.ID || again.ID == busy.ID {
		t.Errorf("the re-created tenant got sandbox %s (reused %v), want a new one", again.ID, again.Reused)
	}
}
