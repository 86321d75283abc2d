package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestExpireSessions: sessions whose log is older than the tenant's TTL go,
// vault first; a vault in use keeps its session for the next sweep; the
// rest stay listed.
func TestExpireSessions(t *testing.T) {
	errBusy := errors.New("vault is open")
	tests := []struct {
		name    string
		quota   Quota
		age     time.Duration // of the "old" and "busy" logs
		expired []string
	}{
		{"default ttl, young", Quota{}, 29 * 24 * time.Hour, nil},
		{"default ttl, old", Quota{}, 31 * 24 * time.Hour, []string{"old"}},
		{"configured ttl", Quota{SessionTTL: time.Hour}, 2 * time.Hour, []string{"old"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var vaults []string
			m := newManager(t, Options{DefaultQuota: tc.quota, Sync: SyncNone,
				ExpireVault: func(tenant, session string) error {
					mu.Lock()
					defer mu.Unlock()
					vaults = append(vaults, tenant+"/"+session)
					if session == "busy" {
						return errBusy
					}
					return nil
				}})
			tn := mustTenant(t, m, "acme")
			for _, s := range []string{"old", "busy", "fresh"} {
				if _, err := tn.Checkpoint(s, "step", nil); err != nil {
					t.Fatal(err)
				}
			}
			sessions := filepath.Join(m.opts.DataDir, "tenants", "acme", "sessions")
			then := time.Now().Add(-tc.age)
			for _, s := range []string{"old", "busy"} {
				if err := os.Chtimes(filepath.Join(sessions, s+logSuffix), then, then); err != nil {
					t.Fatal(err)
				}
			}
			n, err := m.ExpireSessions(t.Context())
			if tc.expired != nil && !errors.Is(err, errBusy) {
				t.Errorf("ExpireSessions error = %v, want the busy vault's", err)
			}
			if n != len(tc.expired) {
				t.Errorf("expired %d sessions, want %d", n, len(tc.expired))
			}
			list, err := tn.ListSessions()
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, s := range list {
				left = append(left, s.ID)
			}
			for _, s := range []string{"old", "busy", "fresh"} {
				if slices.Contains(tc.expired, s) == slices.Contains(left, s) {
					t.Errorf("session %s: listed %v, expired %v", s, left, tc.expired)
				}
			}
			for _, s := range tc.expired {
				if _, err := os.Stat(filepath.Join(sessions, s+metaSuffix)); !os.IsNotExist(err) {
					t.Errorf("%s's summary outlived it: %v", s, err)
				}
				if !slices.Contains(vaults, "acme/"+s) {
					t.Errorf("%s's vault was not removed (calls %v)", s, vaults)
				}
			}
		})
	}
}
