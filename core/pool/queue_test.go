package pool

import (
	"context"
	"errors"
	"testing"
	"time"
)

// acquireAsync starts an Acquire (or AcquireFresh) and returns where its
// lease arrives, once waitFor sees it queued.
func acquireAsync(t *testing.T, p *Pool, tenant string, fresh bool) <-chan *Lease {
	t.Helper()
	p.mu.Lock()
	queued := len(p.waiters)
	p.mu.Unlock()
	got := make(chan *Lease, 1)
	go func() {
		acq := p.Acquire
		if fresh {
			acq = p.AcquireFresh
		}
		l, err := acq(context.Background(), tenant)
		if err != nil {
			t.Errorf("%s: %v", tenant, err)
		}
		got <- l
	}()
	waitFor(t, tenant+" queued", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.waiters) == queued+1
	})
	return got
}

func receive(t *testing.T, what string, c <-chan *Lease) *Lease {
	t.Helper()
	select {
	case l := <-c:
		if l == nil {
			t.Fatalf("%s: no lease", what)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no lease after 30s", what)
	}
	return nil
}

// TestFullPoolQueuesFairly: with every sandbox busy, executions wait; a
// released sandbox goes to the waiting tenant holding the fewest (bob,
// who holds none, before alice's third), as the sandbox itself when the
// waiter is its tenant, else as its place (it is destroyed and one made
// for the waiter).
func TestFullPoolQueuesFairly(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 2})
	ctx := context.Background()
	a1 := leased(t)(p.Acquire(ctx, "alice"))
	a2 := leased(t)(p.Acquire(ctx, "alice"))
	alice3 := acquireAsync(t, p, "alice", false)
	bob := acquireAsync(t, p, "bob", false)

	a1.Release(true)
	lb := receive(t, "bob", bob)
	if lb.Tenant != "bob" || lb.Reused || lb.ID == a1.ID {
		t.Fatalf("bob got %+v, want a sandbox made for him", lb)
	}
	waitFor(t, "alice's released sandbox destroyed", func() bool { return !b.isLive(a1.ID) })
	select {
	case l := <-alice3:
		t.Fatalf("alice's third got %+v while she held one and bob waited", l)
	default:
	}

	a2.Release(true)
	la := receive(t, "alice's third", alice3)
	if la.ID != a2.ID || !la.Reused {
		t.Fatalf("alice's third got %+v, want her released sandbox %s itself", la, a2.ID)
	}
	if n := b.liveCount(); n != 2 {
		t.Errorf("%d sandboxes live, want max_total 2", n)
	}
	lb.Release(true)
	la.Release(true)
}

// TestFreshWaiterGetsAPlace: a fresh lease waiting on a full pool gets a
// new sandbox in the place of a released one, even of its own tenant.
func TestFreshWaiterGetsAPlace(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 1})
	l := leased(t)(p.Acquire(context.Background(), "t"))
	fresh := acquireAsync(t, p, "t", true)
	l.Release(true)
	lf := receive(t, "fresh", fresh)
	if lf.ID == l.ID || lf.Reused {
		t.Fatalf("fresh lease %+v, want a new sandbox", lf)
	}
	lf.Release(true)
}

// TestQueueGivesUp: a waiter whose context ends, or whose wait passes
// QueueTimeout, leaves the queue, and what is freed afterwards is not
// lost to it.
func TestQueueGivesUp(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 1, QueueTimeout: 50 * time.Millisecond})
	l := leased(t)(p.Acquire(context.Background(), "t"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Acquire(ctx, "u")
		done <- err
	}()
	waitFor(t, "u queued", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.waiters) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if _, err := p.Acquire(context.Background(), "u"); err == nil {
		t.Fatal("a full pool gave a lease")
	}
	p.mu.Lock()
	n := len(p.waiters)
	p.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d waiters left in the queue", n)
	}
	l.Release(true)
	again := leased(t)(p.Acquire(context.Background(), "t"))
	if again.ID != l.ID {
		t.Errorf("after the waiters left, the released sandbox was not reused: %s, want %s", again.ID, l.ID)
	}
	again.Release(true)
}

// TestCloseWakesWaiters: closing the pool ends every wait.
func TestCloseWakesWaiters(t *testing.T) {
	b := newMem()
	p := newPool(t, b, Config{MaxTotal: 1})
	l := leased(t)(p.Acquire(context.Background(), "t"))
	done := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background(), "u")
		done <- err
	}()
	waitFor(t, "u queued", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.waiters) == 1 })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = p.Close(context.Background())
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a closed pool gave a lease")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter is still waiting after Close")
	}
	<-closed
	l.Release(true)
}
