package workspace_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// TestSlotsAcrossReplicas: two replicas sharing a data_dir and a
// PostgreSQL store hold a tenant to max_concurrent together.
func TestSlotsAcrossReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	dir := t.TempDir()
	tenants := []*config.Tenant{{ID: "acme", MaxConcurrent: 1}}
	var ms []*workspace.Manager
	for _, id := range []string{"a", "b"} {
		p, err := store.Open(context.Background(), store.Options{DSN: pg.DSN, Replica: id, VaultKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		m, err := workspace.New(workspace.Options{DataDir: dir, Tenants: tenants, SharedDataDir: true, Slots: p, Logger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		ms = append(ms, m)
	}
	ta, err := ms[0].Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := ms[1].Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	x, err := ta.Begin("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Begin(""); !errors.Is(err, workspace.ErrTooManyExecutions) {
		t.Fatalf("second execution on the other replica: %v, want ErrTooManyExecutions", err)
	}
	if _, err := x.Finish(workspace.Entry{Code: "pass"}); err != nil {
		t.Fatal(err)
	}
	y, err := tb.Begin("")
	if err != nil {
		t.Fatalf("after the first finished: %v", err)
	}
	if _, err := y.Finish(workspace.Entry{Code: "pass"}); err != nil {
		t.Fatal(err)
	}
}
