package mcpface

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// initializeAll sends n initializes at once, spread over urls, and counts
// the sessions opened and the 429s.
func initializeAll(t *testing.T, n int, urls ...string) (opened, refused int) {
	t.Helper()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, body := newRaw(t, nil, urls[i%len(urls)]+"/mcp").do(http.MethodPost, initBody)
			mu.Lock()
			defer mu.Unlock()
			switch res.StatusCode {
			case http.StatusOK:
				opened++
			case http.StatusTooManyRequests:
				refused++
			default:
				t.Errorf("initialize: %s %s", res.Status, body)
			}
		}()
	}
	wg.Wait()
	return opened, refused
}

// TestSessionCapUnderRacingInitializes: initializes sent at once, to one
// replica or to two sharing a real PostgreSQL store, open exactly
// mcp.max_sessions_per_tenant sessions; the count and the new session's
// lease are one step.
func TestSessionCapUnderRacingInitializes(t *testing.T) {
	const limit, n = 3, 24
	t.Run("one replica", func(t *testing.T) {
		w := newWorld(t, func(o *Options, _ *world) { o.MaxSessionsPerTenant = limit })
		if opened, refused := initializeAll(t, n, w.url); opened != limit || refused != n-limit {
			t.Fatalf("%d initializes at once: %d opened, %d refused; want %d opened", n, opened, refused, limit)
		}
	})
	t.Run("two replicas", func(t *testing.T) {
		pg := pgtest.Start(t)
		var (
			urls   []string
			stores []*store.Postgres
		)
		for _, id := range []string{"a", "b"} {
			p, err := store.Open(context.Background(), store.Options{DSN: pg.DSN, Replica: id, VaultKey: []byte("k"), Heartbeat: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			w := newWorld(t, func(o *Options, _ *world) { o.Replica, o.Leases, o.MaxSessionsPerTenant = id, p, limit })
			urls, stores = append(urls, w.url), append(stores, p)
		}
		if opened, refused := initializeAll(t, n, urls...); opened != limit || refused != n-limit {
			t.Fatalf("%d initializes at once over two replicas: %d opened, %d refused; want %d opened", n, opened, refused, limit)
		}
		// The refused initializes' reservations are dropped: the store
		// counts the sessions opened, no more.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			held, err := stores[1].TenantSessions(context.Background(), endpoint.DefaultTenant)
			if err != nil {
				t.Fatal(err)
			}
			if held == limit {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the store counts %d sessions of the tenant, want the %d opened", held, limit)
			}
		}
	})
}
