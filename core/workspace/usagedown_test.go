package workspace_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace"
)

// flakyUsage is a shared usage figure whose database can be cut off.
type flakyUsage struct {
	mu    sync.Mutex
	bytes int64
	down  bool
}

var errUnreachable = errors.New("store: PostgreSQL cannot be reached")

func (u *flakyUsage) TenantUsage(context.Context, string) (int64, int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.down {
		return 0, 0, errUnreachable
	}
	return u.bytes, 1, nil
}

func (u *flakyUsage) AddUsage(_ context.Context, _ string, delta, limit int64) (int64, bool, bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.down {
		return 0, false, false, errUnreachable
	}
	if delta > 0 && limit > 0 && u.bytes+delta > limit {
		return u.bytes, false, true, nil
	}
	u.bytes += delta
	return u.bytes, true, true, nil
}

func (u *flakyUsage) RecordUsage(_ context.Context, _ string, walked, _, _ int64) (int64, bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.down {
		return 0, false, errUnreachable
	}
	u.bytes = walked
	return walked, true, nil
}

func (u *flakyUsage) ForgetUsage(context.Context, string) error { return nil }

// TestJournalWhileUsageUnreachable: with replicas' shared disk usage in
// PostgreSQL, a workflow run's journal records are still written while the
// database cannot be reached, checked against the last figure this replica
// read. Before, every record failed ("nothing was journaled: read disk
// usage across replicas"), so a brief PostgreSQL restart stopped every
// running workflow as interrupted, where it stayed while the replicas
// lived, and the task in flight ran again at its resume.
func TestJournalWhileUsageUnreachable(t *testing.T) {
	const quota = 1 << 20
	for _, tc := range []struct {
		name string
		used int64
		want error
	}{
		{"under the quota", 1000, nil},
		{"over the quota", 2 * quota, workspace.ErrQuotaExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &flakyUsage{}
			m, err := workspace.New(workspace.Options{DataDir: t.TempDir(), Tenants: []*config.Tenant{{ID: "acme", DiskQuota: quota}},
				SharedDataDir: true, Usage: u, Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			if err := m.CreateRun("acme", "r1", []byte(`{"kind":"run"}`)); err != nil {
				t.Fatal(err)
			}
			u.mu.Lock()
			u.bytes, u.down = tc.used, false
			u.mu.Unlock()
			if err := m.AppendRun("acme", "r1", []byte(`{"kind":"start"}`), false); !errors.Is(err, tc.want) {
				t.Fatalf("append with the database up: %v, want %v", err, tc.want)
			}
			u.mu.Lock()
			u.down = true
			u.mu.Unlock()
			err = m.AppendRun("acme", "r1", []byte(`{"kind":"done"}`), true)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("append with the database unreachable: %v, want %v (the last figure read)", err, tc.want)
			}
		})
	}
}
