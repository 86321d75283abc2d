package pool

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// sessionStep is one execution of a TestSessionAffinity case: acquired for
// its session, checked, released.
type sessionStep struct {
	session    string
	persistent bool
	fresh      bool // FreshGlobals (with persistent)
	// sandbox labels the sandbox the step must get: a label seen before
	// means that sandbox again, a new one a sandbox no step had.
	sandbox string
	lost    string // the lease's Lost
	held    bool   // the lease's Held
	unfit   bool   // release it unhealthy
	// before runs first (waits for an idle timeout, flushes the pool).
	before func(t *testing.T, p *Pool, b *memBackend, ids map[string]string)
}

// TestSessionAffinity: a persistent session's executions go back to the
// sandbox that holds its interpreter; other sessions' executions leave that
// sandbox alone while the pool has another or room for one; and when the
// pool did end a session's interpreter, the session's next persistent
// execution is told why, once; otherwise it is told its globals are there.
func TestSessionAffinity(t *testing.T) {
	p := func(session, sandbox string) sessionStep {
		return sessionStep{session: session, persistent: true, sandbox: sandbox}
	}
	np := func(session, sandbox string) sessionStep {
		return sessionStep{session: session, sandbox: sandbox}
	}
	f := func(session, sandbox string) sessionStep {
		return sessionStep{session: session, persistent: true, fresh: true, sandbox: sandbox}
	}
	lost := func(s sessionStep, why string) sessionStep { s.lost = why; return s }
	held := func(s sessionStep) sessionStep { s.held = true; return s }
	// ended runs s after session ended (Pool.EndSession).
	ended := func(session string, s sessionStep) sessionStep {
		s.before = func(_ *testing.T, p *Pool, _ *memBackend, _ map[string]string) { p.EndSession("t", session) }
		return s
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []sessionStep
	}{
		{"sessions alternate, each in its own sandbox", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), p("b", "Y"), held(p("a", "X")), held(p("b", "Y")), held(p("a", "X"))}},
		{"another session's one-off execution goes elsewhere", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), np("c", "Y"), np("c", "Y"), held(p("a", "X"))}},
		{"the session's own one-off execution keeps its interpreter", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), np("a", "X"), held(p("a", "X"))}},
		{"full pool: another session ends the interpreter", Config{MaxTotal: 1},
			[]sessionStep{p("a", "X"), np("b", "X"), lost(p("a", "X"), lostTaken), held(p("a", "X"))}},
		{"full pool: sessions take turns", Config{MaxTotal: 1},
			[]sessionStep{p("a", "X"), p("b", "X"), lost(p("a", "X"), lostTaken), lost(p("b", "X"), lostTaken)}},
		{"an unfit sandbox is replaced", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), {session: "a", persistent: true, sandbox: "X", held: true, unfit: true}, lost(p("a", "Y"), lostUnfit)}},
		{"max_uses", Config{MaxTotal: 4, MaxUses: 2},
			[]sessionStep{p("a", "X"), held(p("a", "X")), lost(p("a", "Y"), lostMaxUses)}},
		{"idle timeout", Config{MaxTotal: 4, IdleTimeout: 100 * time.Millisecond},
			[]sessionStep{p("a", "X"), {session: "a", persistent: true, sandbox: "Y", lost: lostIdle,
				before: func(t *testing.T, _ *Pool, b *memBackend, ids map[string]string) {
					waitFor(t, "the idle sandbox stopped", func() bool { return !b.isLive(ids["X"]) })
				}}}},
		{"fresh globals: another session takes the sandbox rather than a new one", Config{MaxTotal: 4},
			[]sessionStep{f("a", "X"), f("b", "X"), f("a", "X"), np("c", "X")}},
		{"fresh globals: never told of a loss", Config{MaxTotal: 1},
			[]sessionStep{f("a", "X"), f("b", "X"), f("a", "X")}},
		{"fresh globals leave an interpreter that keeps globals alone", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), f("b", "Y"), f("c", "Y"), held(p("a", "X"))}},
		{"globals kept once a persistent execution ran", Config{MaxTotal: 1},
			[]sessionStep{f("a", "X"), p("a", "X"), f("a", "X"), np("b", "X"), lost(p("a", "X"), lostTaken)}},
		{"an idle sandbox fails its health check", Config{MaxTotal: 4, HealthCheckAfter: -1},
			[]sessionStep{p("a", "X"), {session: "a", persistent: true, sandbox: "Y", lost: lostSick,
				before: func(_ *testing.T, _ *Pool, b *memBackend, ids map[string]string) {
					b.mu.Lock()
					b.unhealthy[ids["X"]] = true
					b.mu.Unlock()
				}}}},
		{"an ended session's sandbox serves another session", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), p("b", "Y"), ended("a", np("c", "X")), held(p("b", "Y"))}},
		{"an ended session continued finds its interpreter", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), ended("a", held(p("a", "X"))), np("c", "Y")}},
		{"an ended session continued is told another took its sandbox", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), ended("a", np("c", "X")), lost(p("a", "X"), lostClosed)}},
		{"an ended session is still told of an earlier loss", Config{MaxTotal: 1},
			[]sessionStep{p("a", "X"), np("b", "X"), ended("a", lost(p("a", "X"), lostTaken))}},
		{"ending another tenant's session of that name changes nothing", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), {session: "c", sandbox: "Y",
				before: func(_ *testing.T, p *Pool, _ *memBackend, _ map[string]string) { p.EndSession("u", "a") }}}},
		{"backend restart", Config{MaxTotal: 4},
			[]sessionStep{p("a", "X"), {session: "a", persistent: true, sandbox: "Y", lost: lostFlushed,
				before: func(_ *testing.T, p *Pool, _ *memBackend, _ map[string]string) { p.Flush() }}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMem()
			pl := newPool(t, b, tc.cfg)
			ids := map[string]string{}
			for i, s := range tc.steps {
				if s.before != nil {
					s.before(t, pl, b, ids)
				}
				l, err := pl.AcquireFor(context.Background(), "t", Want{Session: s.session, Persistent: s.persistent, FreshGlobals: s.fresh})
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if id, seen := ids[s.sandbox]; seen && l.ID != id {
					t.Errorf("step %d (%s): got sandbox %s, want %s's %s", i, s.session, l.ID, s.sandbox, id)
				}
				if _, seen := ids[s.sandbox]; !seen {
					for label, id := range ids {
						if id == l.ID {
							t.Errorf("step %d (%s): got %s's sandbox, want a new one", i, s.session, label)
						}
					}
					ids[s.sandbox] = l.ID
				}
				if l.Lost != s.lost || l.Held != s.held {
					t.Errorf("step %d (%s): Lost %q Held %v, want %q %v", i, s.session, l.Lost, l.Held, s.lost, s.held)
				}
				l.Release(!s.unfit)
			}
		})
	}
}

// TestSessionHandOff: a sandbox released to a waiting execution of another
// session (the pool full) ends the interpreter it held, which the session
// is told.
func TestSessionHandOff(t *testing.T) {
	pl := newPool(t, newMem(), Config{MaxTotal: 1})
	ctx := context.Background()
	a := leased(t)(pl.AcquireFor(ctx, "t", Want{Session: "a", Persistent: true}))
	got := make(chan *Lease)
	go func() {
		l, err := pl.AcquireFor(ctx, "t", Want{Session: "b"})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, "b waiting", func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return len(pl.waiters) == 1
	})
	a.Release(true)
	b := <-got
	if b == nil || b.ID != a.ID {
		t.Fatalf("b got %v, want a's sandbox %s", b, a.ID)
	}
	b.Release(true)
	again := leased(t)(pl.AcquireFor(ctx, "t", Want{Session: "a", Persistent: true}))
	defer again.Release(true)
	if again.Lost != lostTaken {
		t.Errorf("Lost %q, want %q", again.Lost, lostTaken)
	}
}

// TestInterpreterEnded: an interpreter that ended during an execution
// (the runtime's session_lost) is reported to the session's next persistent
// execution, in the same healthy sandbox, and to that one only.
func TestInterpreterEnded(t *testing.T) {
	pl := newPool(t, newMem(), Config{MaxTotal: 2})
	ctx := context.Background()
	want := Want{Session: "a", Persistent: true}
	first := leased(t)(pl.AcquireFor(ctx, "t", want))
	first.InterpreterEnded()
	first.Release(true)
	for i, wantLost := range []string{lostEnded, ""} {
		l := leased(t)(pl.AcquireFor(ctx, "t", want))
		if l.ID != first.ID || l.Lost != wantLost {
			t.Errorf("execution %d: sandbox %s, Lost %q; want %s, %q", i+2, l.ID, l.Lost, first.ID, wantLost)
		}
		l.Release(true)
	}
}

// TestEndSessionBusy: a session that ends during its execution (the MCP
// session closed meanwhile) leaves its sandbox, once released, to the next
// session rather than kept for it.
func TestEndSessionBusy(t *testing.T) {
	pl := newPool(t, newMem(), Config{MaxTotal: 2})
	ctx := context.Background()
	l := leased(t)(pl.AcquireFor(ctx, "t", Want{Session: "a", Persistent: true}))
	pl.EndSession("t", "a")
	l.Release(true)
	next := leased(t)(pl.AcquireFor(ctx, "t", Want{Session: "b"}))
	if next.ID != l.ID {
		t.Errorf("the next session got sandbox %s, want the ended session's %s", next.ID, l.ID)
	}
	next.Release(true)
}

// TestLostBounded: the pool remembers at most maxLost lost sessions, the
// latest.
func TestLostBounded(t *testing.T) {
	pl := newPool(t, newMem(), Config{MaxTotal: 1})
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for i := range maxLost + 10 {
		pl.lostLocked(&entry{tenant: "t", holder: fmt.Sprint("s", i), keeps: true}, lostIdle)
	}
	if len(pl.lost) != maxLost {
		t.Errorf("%d lost sessions remembered, want %d", len(pl.lost), maxLost)
	}
	if _, ok := pl.lost[sessionKey("t", fmt.Sprint("s", maxLost+9))]; !ok {
		t.Error("the latest lost session was forgotten")
	}
}
