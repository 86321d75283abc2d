package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// auditDir is the tenant's audit log folder (core/audit): beside its
// sessions, outside the folder sandboxes mount, root's 0700.
const auditDir = "audit"

// WithAuditDir runs fn with tenant's audit folder, created on first use
// and reached through the tenant's root, while GC cannot remove the
// tenant. It opens (mounts) the tenant when it is not loaded. In image
// mode what fn writes counts in the tenant's disk quota, in the reserve
// only cexecd writes to.
func (m *Manager) WithAuditDir(tenant string, fn func(dir *os.Root) error) error {
	t, err := m.Tenant(tenant)
	if err != nil {
		return err
	}
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	// Opened first and created only when missing: every execution appends,
	// and the folder exists after the first.
	dir, err := t.root.OpenRoot(auditDir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := t.root.Mkdir(auditDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("tenant %s: create audit folder: %w", t.id, err)
		}
		dir, err = t.root.OpenRoot(auditDir)
	}
	if err != nil {
		return fmt.Errorf("tenant %s: open audit folder: %w", t.id, err)
	}
	defer dir.Close()
	return fn(dir)
}

// Exists reports whether tenant id has a folder (it was used), without
// opening or creating it.
func (m *Manager) Exists(id string) bool {
	if ValidateTenantID(id) != nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(m.dir, id))
	return err == nil && fi.IsDir()
}

// Loaded returns the ids of the tenants open now.
func (m *Manager) Loaded() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.tenants))
	for id := range m.tenants {
		ids = append(ids, id)
	}
	return ids
}
