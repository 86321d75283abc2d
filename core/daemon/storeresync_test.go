package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/internal/testutil/pgtest"
	"github.com/cexec/cexec/internal/testutil/piitest"
)

// TestVaultCacheDroppedAfterListenerCut: a vault another replica changed
// while this replica's change listener was cut (its connection lost, as
// when PostgreSQL restarts) must not stay cached here. The notification
// of that change is lost; a stale vault would restore a token the other
// replica issued as nothing, and issue that same token for another value.
func TestVaultCacheDroppedAfterListenerCut(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	key := []byte("key of the test, 32 bytes long.")
	pa, err := store.Open(ctx, store.Options{DSN: pg.DSN, Replica: "a", VaultKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	// b reconnects its listener a heartbeat after losing it: long enough
	// for a's change to be made while b listens to nothing.
	pb, err := store.Open(ctx, store.Options{DSN: pg.DSN, Replica: "b", VaultKey: key, Heartbeat: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	va, err := vault.NewStore(vault.Options{DataDir: t.TempDir(), Persister: pa})
	if err != nil {
		t.Fatal(err)
	}
	vb, err := vault.NewStore(vault.Options{DataDir: t.TempDir(), Persister: pb})
	if err != nil {
		t.Fatal(err)
	}
	subscribeStore(pb, vb)
	det := piitest.Detector{}

	// b serves the session first and keeps its vault cached.
	v, err := vb.Open("acme", "s1", det)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := v.Tokenize(ctx, "alice@example.com"); err != nil || out != "[EMAIL_1]" {
		t.Fatalf("b tokenizes %q, %v", out, err)
	}
	_ = v.Close()

	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const listener = `FROM pg_stat_activity WHERE application_name = 'cexec/b' AND query LIKE 'LISTEN%'`
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) `+listener); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) `+listener).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b's listener connection still there 10 s after it was terminated")
		}
	}

	// a continues the session meanwhile: its notification reaches no one.
	v, err = va.Open("acme", "s1", det)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := v.Tokenize(ctx, "bob@example.org"); err != nil || out != "[EMAIL_2]" {
		t.Fatalf("a tokenizes %q, %v", out, err)
	}
	_ = v.Close()

	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, err := vb.Open("acme", "s1", det)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Untokenize("[EMAIL_2]")
		_ = v.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got == "bob@example.org" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after b's listener was cut b still restores [EMAIL_2] as %q: its cached vault is stale", got)
		}
	}
}
