package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// replicaTenants opens tenant acme (disk_quota quota, measured) on two
// replicas sharing a data_dir and a real PostgreSQL store.
func replicaTenants(t *testing.T, quota int64) [2]*workspace.Tenant {
	t.Helper()
	pg := pgtest.Start(t)
	dir := t.TempDir()
	tenants := []*config.Tenant{{ID: "acme", DiskQuota: quota}}
	var out [2]*workspace.Tenant
	for i, id := range []string{"a", "b"} {
		p, err := store.Open(context.Background(), store.Options{DSN: pg.DSN, Replica: id, VaultKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		m, err := workspace.New(workspace.Options{DataDir: dir, Tenants: tenants, SharedDataDir: true,
			Slots: p, Usage: p, Logger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if out[i], err = m.Tenant("acme"); err != nil {
			t.Fatal(err)
		}
		if mode := out[i].DiskMode(); mode != workspace.DiskModeMeasured {
			t.Fatalf("replica %s: disk mode %q, want measured", id, mode)
		}
	}
	return out
}

// TestDiskQuotaAcrossReplicas: host writes through two replicas at once
// fit one disk_quota together, not one each.
func TestDiskQuotaAcrossReplicas(t *testing.T) {
	const quota, size = 1 << 20, 100 << 10
	ts := replicaTenants(t, quota)
	value := []byte(`"` + strings.Repeat("x", size-2) + `"`)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		saved    int
		refusals int
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ts[i%2].PutStateFile(fmt.Sprintf("f%d.json", i), value)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				saved++
			case errors.Is(err, workspace.ErrQuotaExceeded):
				refusals++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	used, err := ts[1].CheckQuota()
	if err != nil && !errors.Is(err, workspace.ErrQuotaExceeded) {
		t.Fatal(err)
	}
	t.Logf("%d saves of %d bytes over two replicas, %d refused; %d bytes stored of a %d quota", saved, size, refusals, used, quota)
	if used > quota {
		t.Fatalf("the replicas stored %d bytes together, over the %d quota", used, quota)
	}
	if saved < quota/size-1 {
		t.Fatalf("only %d saves of %d bytes fit a %d quota", saved, size, quota)
	}
}

// TestSandboxWritesSeenByTheOtherReplica: what an execution on one
// replica wrote straight into the workspace (measured after it, off the
// request path) stops the tenant's next execution on the other replica.
func TestSandboxWritesSeenByTheOtherReplica(t *testing.T) {
	const quota = 1 << 20
	ts := replicaTenants(t, quota)
	// Replica b knows the tenant's usage before the write: a figure of
	// its own would stay stale.
	if _, err := ts[1].CheckQuota(); err != nil {
		t.Fatal(err)
	}
	x, err := ts[0].Begin("")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts[0].WorkspaceDir(), "big.bin"), make([]byte, 2*quota), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Finish(workspace.Entry{Code: "write big.bin"}); err != nil && !errors.Is(err, workspace.ErrQuotaExceeded) {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		y, err := ts[1].Begin("")
		if errors.Is(err, workspace.ErrQuotaExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := y.Finish(workspace.Entry{Code: "pass"}); err != nil && !errors.Is(err, workspace.ErrQuotaExceeded) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("replica b still runs the tenant's executions 30 s after replica a measured it over its quota")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Deleting the file through either replica lets it run again.
	if err := os.Remove(filepath.Join(ts[1].WorkspaceDir(), "big.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := ts[0].CheckQuota(); err != nil {
		t.Fatalf("after the delete: %v", err)
	}
	y, err := ts[1].Begin("")
	if err != nil {
		t.Fatalf("replica b after replica a measured the delete: %v", err)
	}
	if _, err := y.Finish(workspace.Entry{Code: "pass"}); err != nil {
		t.Fatal(err)
	}
}
