package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

func open(t *testing.T, dsn, replica string, beat time.Duration) *store.Postgres {
	t.Helper()
	p, err := store.Open(context.Background(), store.Options{DSN: dsn, Replica: replica, VaultKey: []byte("test key"), Heartbeat: beat})
	if err != nil {
		t.Fatalf("open store %s: %v", replica, err)
	}
	return p
}

// TestPostgres runs every part of the store against a real PostgreSQL,
// with two replicas on it.
func TestPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	a := open(t, pg.DSN, "a", time.Second)
	defer a.Close()
	b := open(t, pg.DSN, "b", time.Second)
	bClosed := false
	defer func() {
		if !bClosed {
			b.Close()
		}
	}()

	t.Run("leases", func(t *testing.T) {
		if err := a.ClaimSession(ctx, "acme", "a.s1"); err != nil {
			t.Fatal(err)
		}
		owner, live, found, err := b.SessionOwner(ctx, "a.s1")
		if err != nil || !found || owner != "a" || !live {
			t.Fatalf("owner = %q live %v found %v %v, want a, live", owner, live, found, err)
		}
		if _, _, found, _ := b.SessionOwner(ctx, "nope"); found {
			t.Fatal("an unknown session has an owner")
		}
		if n, err := b.TenantSessions(ctx, "acme"); err != nil || n != 1 {
			t.Fatalf("acme's sessions = %d %v, want 1", n, err)
		}
		if err := b.ClaimSession(ctx, "acme", "a.s1"); err != nil { // failover
			t.Fatal(err)
		}
		if owner, _, _, _ := a.SessionOwner(ctx, "a.s1"); owner != "b" {
			t.Fatalf("after b claimed it the owner is %q", owner)
		}
		if err := a.ReleaseSession(ctx, "a.s1"); err != nil { // not a's any more: a no-op
			t.Fatal(err)
		}
		if _, _, found, _ := a.SessionOwner(ctx, "a.s1"); !found {
			t.Fatal("a released b's lease")
		}
	})

	t.Run("session reservations count across replicas", func(t *testing.T) {
		r1, n, err := a.ReserveSession(ctx, "cap", 2)
		if err != nil || r1 == "" || n != 0 {
			t.Fatalf("first reservation: %q %d %v", r1, n, err)
		}
		r2, n, err := b.ReserveSession(ctx, "cap", 2)
		if err != nil || r2 == "" || n != 1 {
			t.Fatalf("second reservation, on the other replica: %q %d %v", r2, n, err)
		}
		if r, n, err := a.ReserveSession(ctx, "cap", 2); r != "" || n != 2 || err != nil {
			t.Fatalf("third of 2: %q %d %v, want full", r, n, err)
		}
		if err := a.ConfirmSession(ctx, "cap", r1, "a.s1"); err != nil {
			t.Fatal(err)
		}
		if owner, live, found, _ := b.SessionOwner(ctx, "a.s1"); !found || !live || owner != "a" {
			t.Fatalf("confirmed session: owner %q live %v found %v", owner, live, found)
		}
		if err := b.ReleaseSession(ctx, r2); err != nil { // the initialize failed
			t.Fatal(err)
		}
		if n, err := a.TenantSessions(ctx, "cap"); n != 1 || err != nil {
			t.Fatalf("after one confirmed and one dropped: %d sessions %v, want 1", n, err)
		}
		if err := a.ReleaseSession(ctx, "a.s1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("slots across replicas", func(t *testing.T) {
		relA, full, err := a.AcquireSlot(ctx, "acme", 2)
		if err != nil || full {
			t.Fatal(full, err)
		}
		relB, full, err := b.AcquireSlot(ctx, "acme", 2)
		if err != nil || full {
			t.Fatal(full, err)
		}
		if _, full, err := a.AcquireSlot(ctx, "acme", 2); !full || err != nil {
			t.Fatalf("third slot of 2: full %v %v, want full", full, err)
		}
		if rel, full, err := a.AcquireSlot(ctx, "other", 1); err != nil || full {
			t.Fatalf("another tenant's slot: %v %v", full, err)
		} else {
			rel()
		}
		relB()
		rel, full, err := a.AcquireSlot(ctx, "acme", 2)
		if err != nil || full {
			t.Fatalf("slot after a release: %v %v", full, err)
		}
		rel()
		relA()
	})

	t.Run("concurrent slots never exceed max", func(t *testing.T) {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			granted []func()
		)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := a
				if i%2 == 1 {
					p = b
				}
				rel, full, err := p.AcquireSlot(ctx, "burst", 5)
				if err != nil {
					t.Error(err)
				}
				if full || err != nil {
					return
				}
				mu.Lock()
				granted = append(granted, rel)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(granted) != 5 {
			t.Fatalf("%d slots granted of max 5", len(granted))
		}
		for _, rel := range granted {
			rel()
		}
	})

	t.Run("vaults encrypted and invalidated", func(t *testing.T) {
		got := make(chan string, 4)
		b.Subscribe(store.TopicVault, func(p string) { got <- p })
		secret := []byte(`{"entries":[{"value":"alice@example.com"}]}`)
		if err := a.SaveVault(ctx, "acme", "s1", secret); err != nil {
			t.Fatal(err)
		}
		if p := <-got; p != "acme/s1" {
			t.Fatalf("notification %q, want acme/s1", p)
		}
		data, err := b.LoadVault(ctx, "acme", "s1")
		if err != nil || !bytes.Equal(data, secret) {
			t.Fatalf("b loads %q %v", data, err)
		}
		if data, err := b.LoadVault(ctx, "acme", "s2"); err != nil || data != nil {
			t.Fatalf("a missing vault: %q %v", data, err)
		}
		// At rest: no plaintext in the row.
		conn, err := pgx.Connect(ctx, pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var sealed []byte
		if err := conn.QueryRow(ctx, `SELECT sealed FROM cexec_vaults WHERE tenant = 'acme' AND session = 's1'`).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(sealed, []byte("alice")) {
			t.Fatal("the vault is stored in the clear")
		}
		// A row moved to another session does not open there.
		if _, err := conn.Exec(ctx, `INSERT INTO cexec_vaults SELECT tenant, 's3', sealed, updated FROM cexec_vaults WHERE session = 's1'`); err != nil {
			t.Fatal(err)
		}
		if _, err := a.LoadVault(ctx, "acme", "s3"); err == nil {
			t.Fatal("a vault copied to another session opened")
		}
		other := open(t, pg.DSN, "c", time.Second)
		defer other.Close()
		if err := a.DeleteVault(ctx, "acme", "s1"); err != nil {
			t.Fatal(err)
		}
		if data, _ := b.LoadVault(ctx, "acme", "s1"); data != nil {
			t.Fatal("deleted vault still loads")
		}
	})

	t.Run("skills registry notifies", func(t *testing.T) {
		got := make(chan string, 1)
		a.Subscribe(store.TopicSkills, func(p string) { got <- p })
		if err := b.RegisterSkill(ctx, "acme", "shout", "Upper-case text"); err != nil {
			t.Fatal(err)
		}
		if p := <-got; p != "acme" {
			t.Fatalf("notification %q, want acme", p)
		}
		conn, err := pgx.Connect(ctx, pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var desc, replica string
		if err := conn.QueryRow(ctx, `SELECT description, replica FROM cexec_skills WHERE tenant = 'acme' AND name = 'shout'`).Scan(&desc, &replica); err != nil || desc != "Upper-case text" || replica != "b" {
			t.Fatalf("registry row = %q %q %v", desc, replica, err)
		}
	})

	t.Run("disk usage is one figure across replicas", func(t *testing.T) {
		if _, ok, measured, err := a.AddUsage(ctx, "disk", 10, 100); ok || measured || err != nil {
			t.Fatalf("reserve before any measurement: ok %v measured %v %v, want neither", ok, measured, err)
		}
		if n, landed, err := b.RecordUsage(ctx, "disk", 1000, 0, 0); n != 1000 || !landed || err != nil {
			t.Fatalf("first measurement: %d %v", n, err)
		}
		// Twenty reservations of 100 through both replicas at once: ten fit
		// the 2000 limit.
		var wg sync.WaitGroup
		var mu sync.Mutex
		granted := 0
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := a
				if i%2 == 1 {
					p = b
				}
				_, ok, _, err := p.AddUsage(ctx, "disk", 100, 2000)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if n, _, _ := a.TenantUsage(ctx, "disk"); granted != 10 || n != 2000 {
			t.Fatalf("%d reservations of 100 granted, figure %d; want 10 and 2000", granted, n)
		}
		if n, ok, _, err := b.AddUsage(ctx, "disk", -300, 2000); !ok || n != 1700 || err != nil {
			t.Fatalf("a shrinking write: %d %v %v", n, ok, err)
		}
		// A walk that saw 900 bytes while 50 more were reserved: 950. The
		// reservations of replicas that died before writing are gone.
		base, gen, err := a.TenantUsage(ctx, "disk")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, _, _ := b.AddUsage(ctx, "disk", 50, 0); !ok {
			t.Fatal("an unlimited reservation was refused")
		}
		if n, landed, err := a.RecordUsage(ctx, "disk", 900, base, gen); n != 950 || !landed || err != nil {
			t.Fatalf("walk with a write during it: %d %v %v, want 950, landed", n, landed, err)
		}
		// A walk overtaken by that one is dropped, and says so.
		if n, landed, err := b.RecordUsage(ctx, "disk", 10, base, gen); n != 950 || landed || err != nil {
			t.Fatalf("an overtaken walk: %d %v %v, want the figure to stay 950, not landed", n, landed, err)
		}
		if err := b.ForgetUsage(ctx, "disk"); err != nil {
			t.Fatal(err)
		}
		if _, gen, err := a.TenantUsage(ctx, "disk"); gen != 0 || err != nil {
			t.Fatalf("after forget: generation %d %v, want 0", gen, err)
		}
	})

	t.Run("approvals are listed and decided from any replica", func(t *testing.T) {
		verdicts := make(chan string, 4)
		a.Subscribe(store.TopicApproval, func(p string) { verdicts <- p })
		created := time.Now().Round(time.Microsecond)
		want := store.Approval{ID: "ap1", Tenant: "acme", Session: "s1", Server: "memory", Tool: "delete_entities",
			Arguments: json.RawMessage(`{"entityNames":["<PERSON_1>"]}`), Reason: "destructive", Created: created,
			Deadline: created.Add(time.Minute), Replica: "a"}
		if err := a.AddApproval(ctx, want); err != nil {
			t.Fatal(err)
		}
		list, err := b.PendingApprovals(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("b lists %+v %v, want a's one call", list, err)
		}
		got := list[0]
		if got.ID != want.ID || got.Replica != "a" || string(got.Arguments) != string(want.Arguments) || got.Reason != want.Reason ||
			!got.Created.Equal(want.Created) || !got.Deadline.Equal(want.Deadline) || got.Tool != want.Tool {
			t.Fatalf("b lists %+v, want %+v", got, want)
		}
		if decided, _, err := a.ApprovalDecision(ctx, "ap1"); decided || err != nil {
			t.Fatalf("pending call reads as decided: %v %v", decided, err)
		}
		if found, err := b.DecideApproval(ctx, "ap1", true); !found || err != nil {
			t.Fatalf("b decides a's call: found %v %v", found, err)
		}
		select {
		case v := <-verdicts:
			if id, approve, ok := store.ParseApprovalVerdict(v); !ok || id != "ap1" || !approve {
				t.Fatalf("a heard %q", v)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a heard no verdict")
		}
		if decided, approve, err := a.ApprovalDecision(ctx, "ap1"); !decided || !approve || err != nil {
			t.Fatalf("a reads the decision back: decided %v approve %v %v", decided, approve, err)
		}
		if list, _ := b.PendingApprovals(ctx); len(list) != 0 {
			t.Fatalf("a decided call is still listed: %+v", list)
		}
		if found, err := a.DecideApproval(ctx, "ap1", false); found || err != nil {
			t.Fatalf("a second decision: found %v %v, want not found", found, err)
		}
		if found, err := b.DecideApproval(ctx, "nope", true); found || err != nil {
			t.Fatalf("an unknown id: found %v %v", found, err)
		}
		if err := a.RemoveApproval(ctx, "ap1"); err != nil {
			t.Fatal(err)
		}
		if decided, _, err := a.ApprovalDecision(ctx, "ap1"); decided || err != nil {
			t.Fatalf("a removed call: decided %v %v", decided, err)
		}
		// A call without a deadline.
		if err := b.AddApproval(ctx, store.Approval{ID: "ap2", Tenant: "acme", Session: "s2", Server: "m", Tool: "t",
			Arguments: json.RawMessage(`{}`), Created: created}); err != nil {
			t.Fatal(err)
		}
		if list, err := a.PendingApprovals(ctx); err != nil || len(list) != 1 || !list[0].Deadline.IsZero() || list[0].Replica != "b" {
			t.Fatalf("a lists %+v %v, want b's call without a deadline", list, err)
		}
	})

	t.Run("a closed replica's lease is dead and adoptable", func(t *testing.T) {
		if err := b.ClaimSession(ctx, "acme", "b.s9"); err != nil {
			t.Fatal(err)
		}
		if ok, err := a.AdoptSession(ctx, "acme", "b.s9"); ok || err != nil {
			t.Fatalf("adopted a live replica's session: %v %v", ok, err)
		}
		if _, full, err := b.AcquireSlot(ctx, "dead", 1); err != nil || full {
			t.Fatal(full, err)
		}
		bClosed = true
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if owner, live, found, _ := a.SessionOwner(ctx, "b.s9"); !found || live || owner != "b" {
			t.Fatalf("closed replica's lease: owner %q live %v found %v, want b, dead", owner, live, found)
		}
		if ok, err := a.AdoptSession(ctx, "other", "b.s9"); ok || err != nil {
			t.Fatalf("another tenant adopted the session: %v %v", ok, err)
		}
		if ok, err := a.AdoptSession(ctx, "acme", "b.s9"); !ok || err != nil {
			t.Fatalf("adopt a dead replica's session: %v %v", ok, err)
		}
		if owner, live, _, _ := a.SessionOwner(ctx, "b.s9"); owner != "a" || !live {
			t.Fatalf("after adoption the owner is %q (live %v)", owner, live)
		}
		rel, full, err := a.AcquireSlot(ctx, "dead", 1)
		if err != nil || full {
			t.Fatalf("a closed replica's slot still counts: %v %v", full, err)
		}
		rel()
		// b's call (ap2, added above) died with it.
		if list, err := a.PendingApprovals(ctx); err != nil || len(list) != 0 {
			t.Fatalf("a closed replica's approvals are listed: %+v %v", list, err)
		}
		if found, err := a.DecideApproval(ctx, "ap2", true); found || err != nil {
			t.Fatalf("decided a closed replica's call: %v %v", found, err)
		}
	})
}

func TestParseApprovalVerdict(t *testing.T) {
	for _, tc := range []struct {
		payload string
		id      string
		approve bool
		ok      bool
	}{
		{"1:ab12", "ab12", true, true},
		{"0:ab12", "ab12", false, true},
		{"2:ab12", "", false, false},
		{"1:", "", false, false},
		{"ab12", "", false, false},
		{"", "", false, false},
	} {
		id, approve, ok := store.ParseApprovalVerdict(tc.payload)
		if id != tc.id || approve != tc.approve || ok != tc.ok {
			t.Errorf("ParseApprovalVerdict(%q) = %q %v %v, want %q %v %v", tc.payload, id, approve, ok, tc.id, tc.approve, tc.ok)
		}
	}
}

// TestSlotReleaseOutlivesOutage: an execution that ends while PostgreSQL
// is down (restarted) cannot delete its slot then; the slot must still be
// given back once the database is reachable again, or the tenant's
// max_concurrent stays taken on every replica for as long as this one
// lives.
func TestSlotReleaseOutlivesOutage(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	a := open(t, pg.DSN, "a", 200*time.Millisecond)
	defer a.Close()
	release, full, err := a.AcquireSlot(ctx, "acme", 1)
	if err != nil || full {
		t.Fatalf("acquire: full %v, %v", full, err)
	}
	pg.Stop(t)
	release() // fails: the database is down
	pg.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, full, err := a.AcquireSlot(ctx, "acme", 1)
		if err == nil && !full {
			r()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after PostgreSQL came back the slot released during the outage is still taken (full %v, %v)", full, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLeaseReleaseOutlivesOutage: a session that ends while PostgreSQL is
// down cannot drop its lease then; the lease must still go once the
// database is back, or it counts against mcp.max_sessions_per_tenant for
// as long as this replica lives.
func TestLeaseReleaseOutlivesOutage(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	a := open(t, pg.DSN, "a", 200*time.Millisecond)
	defer a.Close()
	if err := a.ClaimSession(ctx, "acme", "a.s1"); err != nil {
		t.Fatal(err)
	}
	pg.Stop(t)
	if err := a.ReleaseSession(ctx, "a.s1"); err == nil {
		t.Fatal("ReleaseSession succeeded with the database down")
	}
	pg.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := a.TenantSessions(ctx, "acme")
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after PostgreSQL came back the tenant still has %d sessions (%v), want 0", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReplicaIDInUse: a second cexecd with the id of a running replica
// (two on one host, both deriving it from the host name) is refused,
// instead of starting and deleting the running one's slots, approvals
// and reservations as "left by a previous run of it". Once the first
// stops, the id is free again.
func TestReplicaIDInUse(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	a := open(t, pg.DSN, "a", time.Second)
	if _, full, err := a.AcquireSlot(ctx, "acme", 1); err != nil || full {
		t.Fatalf("acquire: full %v, %v", full, err)
	}
	dup, err := store.Open(ctx, store.Options{DSN: pg.DSN, Replica: "a", VaultKey: []byte("test key")})
	if err == nil {
		dup.Close()
		t.Fatal("a second store opened with the id of a running replica")
	}
	if !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), "replica") {
		t.Errorf("error %q does not name the replica id in use", err)
	}
	if _, full, _ := a.AcquireSlot(ctx, "acme", 1); !full {
		t.Error("the running replica's slot was dropped by the refused one")
	}
	a.Close()
	open(t, pg.DSN, "a", time.Second).Close()
}

// TestRestartKeepsReplicasAlive: right after PostgreSQL restarts, a
// running replica holds no connection until it reconnects (its next
// heartbeat); it must not count as dead meanwhile, or another replica
// takes slots past max_concurrent beside its running executions.
func TestRestartKeepsReplicasAlive(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	const beat = 5 * time.Second
	a := open(t, pg.DSN, "a", beat)
	defer a.Close()
	b := open(t, pg.DSN, "b", beat)
	defer b.Close()
	if _, full, err := a.AcquireSlot(ctx, "acme", 1); err != nil || full {
		t.Fatalf("acquire on a: full %v, %v", full, err)
	}
	pg.Stop(t)
	pg.Restart(t)
	for range 5 { // b's pooled connections died with the server
		release, full, err := b.AcquireSlot(ctx, "acme", 1)
		if err != nil {
			continue
		}
		if !full {
			release()
			t.Fatal("after a restart of PostgreSQL, b took a second slot of max_concurrent 1 beside a's running execution")
		}
		return
	}
	t.Fatal("b could not count slots after the restart")
}

// TestApprovalRemovalOutlivesOutage: a call that stops waiting while
// PostgreSQL is down cannot leave the shared queue then; it must still
// leave once the database is back, or every replica lists it as waiting
// (and "approves" it to no effect) until this replica restarts.
func TestApprovalRemovalOutlivesOutage(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	a := open(t, pg.DSN, "a", 200*time.Millisecond)
	defer a.Close()
	if err := a.AddApproval(ctx, store.Approval{ID: "ap1", Tenant: "acme", Session: "s1", Server: "m", Tool: "t",
		Arguments: json.RawMessage(`{}`), Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	pg.Stop(t)
	if err := a.RemoveApproval(ctx, "ap1"); err == nil {
		t.Fatal("RemoveApproval succeeded with the database down")
	}
	pg.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := a.PendingApprovals(ctx)
		if err == nil && len(list) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after PostgreSQL came back the shared queue still lists %+v (%v)", list, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRestartedReplicaLeases: a replica started again with its id (a
// fixed cexec { replica }, a StatefulSet) finds its previous run's leases:
// those sessions ended with that run, so they no longer count against
// mcp.max_sessions_per_tenant, and a client continuing one (execute_code
// with its session) has it adopted here, as on any other replica.
func TestRestartedReplicaLeases(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	a := open(t, pg.DSN, "a", time.Second)
	if err := a.ClaimSession(ctx, "acme", "a.old"); err != nil {
		t.Fatal(err)
	}
	a.Close()
	a = open(t, pg.DSN, "a", time.Second)
	defer a.Close()
	if n, err := a.TenantSessions(ctx, "acme"); err != nil || n != 0 {
		t.Errorf("after the replica's restart acme has %d live sessions (%v), want 0: the old one died with the previous run", n, err)
	}
	if ok, err := a.AdoptSession(ctx, "acme", "a.old"); err != nil || !ok {
		t.Errorf("the restarted replica adopting its previous run's session: %v %v, want adopted", ok, err)
	}
	if n, err := a.TenantSessions(ctx, "acme"); err != nil || n != 1 {
		t.Errorf("after adopting it acme has %d live sessions (%v), want 1", n, err)
	}
}

// TestUnreachableSaysSo: with PostgreSQL stopped, and on the pooled
// connections its restart ended, a store error says the database cannot be
// reached rather than quoting pgx alone ("terminating connection due to
// administrator command").
func TestUnreachableSaysSo(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	a := open(t, pg.DSN, "a", time.Hour) // no heartbeat to take the dead connections first
	defer a.Close()
	if _, err := a.TenantSessions(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	pg.Stop(t)
	_, err := a.TenantSessions(ctx, "acme")
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL cannot be reached") {
		t.Errorf("with PostgreSQL stopped: %v", err)
	}
	pg.Restart(t)
	for range 3 {
		if _, err := a.TenantSessions(ctx, "acme"); err != nil && !strings.Contains(err.Error(), "PostgreSQL cannot be reached") {
			t.Errorf("after the restart: %v", err)
		}
	}
	if _, err := a.TenantSessions(ctx, "acme"); err != nil {
		t.Errorf("the store did not recover: %v", err)
	}
}

// TestReplicaGone: a replica is told of another that stops or loses its
// connections (killed), so that it can take over the workflow runs that
// one held, and of nothing else.
func TestReplicaGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, pg *pgtest.Server, b *store.Postgres)
	}{
		{"stopped", func(t *testing.T, _ *pgtest.Server, b *store.Postgres) {
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{"killed", func(t *testing.T, pg *pgtest.Server, _ *store.Postgres) {
			conn, err := pgx.Connect(context.Background(), pg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'cexec/b'`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := pgtest.Start(t)
			// b beats rarely: killed, it does not come back during the test.
			b := open(t, pg.DSN, "b", time.Minute)
			a := open(t, pg.DSN, "a", 200*time.Millisecond)
			defer a.Close()
			gone := make(chan string, 4)
			a.OnReplicaGone(func(id string) { gone <- id })
			tc.end(t, pg, b)
			select {
			case id := <-gone:
				if id != "b" {
					t.Fatalf("gone: %q, want b", id)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("a was not told that b went within 15 s")
			}
			select {
			case id := <-gone:
				t.Fatalf("told again: %q", id)
			case <-time.After(time.Second):
			}
			if tc.name == "killed" {
				_ = b.Close()
			}
		})
	}
}

// TestReplicaGoneHungThenKilled: a replica that hangs (its heartbeats stop,
// its connections stay: SIGSTOP, a long pause) is reported gone, and again
// when it is then killed and its connections close. At the first report
// it still held its workflow runs (flocks), so the pass it started resumed
// none; without the second, nothing resumed them while the others lived.
func TestReplicaGoneHungThenKilled(t *testing.T) {
	pg := pgtest.Start(t)
	// b beats once, at open: from then on it looks hung.
	b := open(t, pg.DSN, "b", time.Hour)
	a := open(t, pg.DSN, "a", 200*time.Millisecond)
	defer a.Close()
	gone := make(chan string, 4)
	a.OnReplicaGone(func(id string) { gone <- id })
	wait := func(what string) {
		t.Helper()
		select {
		case id := <-gone:
			if id != "b" {
				t.Fatalf("gone: %q, want b", id)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("a was not told that b went (%s) within 15 s", what)
		}
	}
	wait("hung")
	select {
	case id := <-gone:
		t.Fatalf("told again while b hangs: %q", id)
	case <-time.After(time.Second):
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wait("killed after it hung")
	select {
	case id := <-gone:
		t.Fatalf("told again: %q", id)
	case <-time.After(time.Second):
	}
}
