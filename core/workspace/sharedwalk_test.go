package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace"
)

// overtakenUsage is a shared usage figure that another replica's walk
// overtakes the next overtakes times: that walk, begun before a file was
// removed, records stale bytes just before this replica's walk records.
type overtakenUsage struct {
	mu         sync.Mutex
	bytes, gen int64
	overtakes  int
	stale      int64
	walks      int
}

func (u *overtakenUsage) TenantUsage(context.Context, string) (int64, int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bytes, u.gen, nil
}

func (u *overtakenUsage) AddUsage(_ context.Context, _ string, delta, _ int64) (int64, bool, bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.bytes += delta
	return u.bytes, true, u.gen > 0, nil
}

func (u *overtakenUsage) RecordUsage(_ context.Context, _ string, walked, base, gen int64) (int64, bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.walks++
	if u.overtakes > 0 {
		u.overtakes--
		u.bytes, u.gen = u.stale, u.gen+1
	}
	if gen != u.gen {
		return u.bytes, false, nil
	}
	u.bytes, u.gen = max(walked+u.bytes-base, 0), u.gen+1
	return u.bytes, true, nil
}

func (u *overtakenUsage) ForgetUsage(context.Context, string) error { return nil }

// TestOvertakenWalkIsMadeAgain: a quota check whose walk another replica's
// older walk overtook walks again rather than keep that one's figure. Before,
// a file removed while that walk ran still counted, and a tenant refused as
// over its quota stayed refused (what TestSandboxWritesSeenByTheOtherReplica
// met once under load).
func TestOvertakenWalkIsMadeAgain(t *testing.T) {
	const quota = 1 << 20
	for _, tc := range []struct {
		name      string
		overtakes int
		walks     int
		want      int64
		err       error
	}{
		{"not overtaken", 0, 1, 1000, nil},
		{"overtaken once", 1, 2, 1000, nil},
		{"overtaken every time", 10, 3, 2 * quota, workspace.ErrQuotaExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &overtakenUsage{}
			m, err := workspace.New(workspace.Options{DataDir: t.TempDir(), Tenants: []*config.Tenant{{ID: "acme", DiskQuota: quota}},
				SharedDataDir: true, Usage: u, Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			ten, err := m.Tenant("acme")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ten.WorkspaceDir(), "small.bin"), make([]byte, 1000), 0o600); err != nil {
				t.Fatal(err)
			}
			u.mu.Lock()
			u.walks, u.overtakes, u.stale = 0, tc.overtakes, 2*quota
			u.mu.Unlock()
			used, err := ten.CheckQuota()
			u.mu.Lock()
			walks := u.walks
			u.mu.Unlock()
			if used != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) || walks != tc.walks {
				t.Fatalf("CheckQuota = %d, %v after %d walks; want %d, %v after %d", used, err, walks, tc.want, tc.err, tc.walks)
			}
		})
	}
}
