package vault_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// TestPersisterAcrossReplicas: two replicas' stores over one PostgreSQL
// (core/store) share a session's vault: a token one issued, the other
// restores, and after Forget (a change notification) sees new ones.
func TestPersisterAcrossReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	replicas := make([]*vault.Store, 2)
	for i, id := range []string{"a", "b"} {
		p, err := store.Open(ctx, store.Options{DSN: pg.DSN, Replica: id, VaultKey: []byte("key of the test, 32 bytes long.")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		dir := t.TempDir()
		s, err := vault.NewStore(vault.Options{DataDir: dir, Persister: p})
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = s
	}
	a, b := replicas[0], replicas[1]
	det := piiDetector{}

	va := open(t, a, "acme", "s1", det)
	if got := tokenize(t, va, "mail alice@example.com"); got != "mail [EMAIL_1]" {
		t.Fatalf("Tokenize = %q", got)
	}
	va.Close()
	vb := open(t, b, "acme", "s1", det)
	if got := untokenize(t, vb, "to [EMAIL_1]"); got != "to alice@example.com" {
		t.Fatalf("the other replica restores %q", got)
	}
	if got := tokenize(t, vb, "bob@example.org"); got != "[EMAIL_2]" {
		t.Fatalf("the other replica issues %q, want the next number", got)
	}
	vb.Close()
	a.Forget("acme", "s1")
	va = open(t, a, "acme", "s1", det)
	if got := untokenize(t, va, "[EMAIL_2]"); got != "bob@example.org" {
		t.Fatalf("after Forget the first replica restores %q", got)
	}
	va.Close()
	// Nothing under data_dir: the vault lives in PostgreSQL only.
	if _, err := os.Stat(filepath.Join(a.Path("acme", "s1"))); !os.IsNotExist(err) {
		t.Fatalf("a vault file was written: %v", err)
	}
	if err := a.Delete("acme", "s1"); err != nil {
		t.Fatal(err)
	}
	b.Forget("acme", "s1")
	vb = open(t, b, "acme", "s1", det)
	defer vb.Close()
	if got := untokenize(t, vb, "[EMAIL_1]"); got != "[EMAIL_1]" {
		t.Fatalf("a deleted vault still restores: %q", got)
	}
}
