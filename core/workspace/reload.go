package workspace

import (
	"fmt"
	"slices"

	"github.com/cexec/cexec/core/config"
)

// declaredTenants indexes tenant blocks by id.
func declaredTenants(blocks []*config.Tenant) (map[string]*config.Tenant, error) {
	out := make(map[string]*config.Tenant, len(blocks))
	for _, t := range blocks {
		if err := ValidateTenantID(t.ID); err != nil {
			return nil, fmt.Errorf("workspace: tenant block: %w", err)
		}
		out[t.ID] = t
	}
	return out, nil
}

// decl is the tenant block of id, nil when it has none.
func (m *Manager) decl(id string) *config.Tenant { return (*m.declared.Load())[id] }

// SetTenants applies reloaded tenant blocks. Tenants opened from now on get
// the new blocks. Open tenants take at once the limits that are read per
// execution or write (max_concurrent, allowed_servers, max_session_log,
// session_ttl); a changed disk_quota or max_files keeps its old value until
// a restart, since an open tenant's image has its size. It returns the ids
// of open tenants whose disk limits wait for that restart.
func (m *Manager) SetTenants(blocks []*config.Tenant) ([]string, error) {
	declared, err := declaredTenants(blocks)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.declared.Store(&declared)
	var waiting []string
	for id, t := range m.tenants {
		old, next := t.Quota(), m.quotaOf(declared[id])
		if next.DiskBytes != old.DiskBytes || next.MaxFiles != old.MaxFiles {
			next.DiskBytes, next.MaxFiles = old.DiskBytes, old.MaxFiles
			waiting = append(waiting, id)
		}
		t.quota.Store(&next)
	}
	slices.Sort(waiting)
	return waiting, nil
}
