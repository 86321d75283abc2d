package workspace

import (
	"errors"
	"slices"
	"testing"

	"github.com/cexec/cexec/core/config"
)

// TestSetTenants reloads tenant blocks: an open tenant takes the new
// per-execution limits at once and keeps its disk limits; a tenant opened
// later gets the whole new block; a block for a new tenant applies.
func TestSetTenants(t *testing.T) {
	m := newManager(t, Options{Sync: SyncNone, Tenants: []*config.Tenant{
		{ID: "acme", MaxConcurrent: 1, DiskQuota: 1 << 20, MaxFiles: 100},
	}})
	acme, err := m.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	release, err := acme.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acme.Acquire(); !errors.Is(err, ErrTooManyExecutions) {
		t.Fatalf("second slot before reload: %v", err)
	}

	waiting, err := m.SetTenants([]*config.Tenant{
		{ID: "acme", MaxConcurrent: 2, DiskQuota: 2 << 20, MaxFiles: 100, AllowedServers: []string{"memory"}},
		{ID: "globex", AllowedServers: []string{"filesystem"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waiting, []string{"acme"}) {
		t.Errorf("tenants waiting for a restart = %v, want [acme]", waiting)
	}
	second, err := acme.Acquire()
	if err != nil {
		t.Fatalf("second slot after max_concurrent 1 -> 2: %v", err)
	}
	second()
	release()
	if acme.Allowed("filesystem") || !acme.Allowed("memory") {
		t.Errorf("acme allowed_servers after reload: filesystem %v, memory %v", acme.Allowed("filesystem"), acme.Allowed("memory"))
	}
	if q := acme.Quota(); q.DiskBytes != 1<<20 {
		t.Errorf("open tenant's disk quota changed to %d without a restart", q.DiskBytes)
	}
	globex, err := m.Tenant("globex")
	if err != nil {
		t.Fatal(err)
	}
	if !globex.Allowed("filesystem") || globex.Allowed("memory") {
		t.Error("a tenant added by the reload did not get its block")
	}

	if _, err := m.SetTenants([]*config.Tenant{{ID: "../x"}}); err == nil {
		t.Error("an invalid tenant id was accepted")
	}
	if !acme.Allowed("memory") {
		t.Error("a refused reload changed the tenants")
	}
}
