package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSharedDataDirKeepsFreshTemps: opening a tenant removes temporary
// files left by a crash, but on a shared data_dir only old ones: a fresh one
// may be another replica's write in flight.
func TestSharedDataDirKeepsFreshTemps(t *testing.T) {
	for _, tc := range []struct {
		name               string
		shared             bool
		keepFresh, keepOld bool
	}{
		{"one daemon", false, false, false},
		{"replicas", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tenant := filepath.Join(dir, "tenants", "acme")
			if err := os.MkdirAll(tenant, 0o700); err != nil {
				t.Fatal(err)
			}
			fresh, old := filepath.Join(tenant, tempPrefix+"fresh"), filepath.Join(tenant, tempPrefix+"old")
			for _, p := range []string{fresh, old} {
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			hourAgo := time.Now().Add(-time.Hour)
			if err := os.Chtimes(old, hourAgo, hourAgo); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, Options{DataDir: dir, SharedDataDir: tc.shared, Sync: SyncNone})
			if _, err := m.Tenant("acme"); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]bool{fresh: tc.keepFresh, old: tc.keepOld} {
				if _, err := os.Stat(p); (err == nil) != want {
					t.Errorf("%s kept = %v, want %v", filepath.Base(p), err == nil, want)
				}
			}
		})
	}
}
