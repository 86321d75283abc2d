package workspace

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// clock is a settable time source for tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newManager returns a Manager over a fresh data dir, closed at cleanup.
func newManager(t testing.TB, opts Options) *Manager {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func mustTenant(t testing.TB, m *Manager, id string) *Tenant {
	t.Helper()
	tn, err := m.Tenant(id)
	if err != nil {
		t.Fatalf("Tenant(%s): %v", id, err)
	}
	return tn
}

// writeFile plays sandboxed code writing into the workspace.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// repoSkills is the repository's shared skills folder.
func repoSkills(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../../skills")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// settle waits for the tenant's accountant to finish measuring.
func settle(tn *Tenant) { tn.acct.Wait() }
