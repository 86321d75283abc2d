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
// only cexecd writes to. fn may run on several goroutines at once and must
// not close dir.
func (m *Manager) WithAuditDir(tenant string, fn func(dir *os.Root) error) error {
	t, err := m.Tenant(tenant)
	if err != nil {
		return err
	}
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	dir, err := t.auditRoot()
	if err != nil {
		return fmt.Errorf("tenant %s: open audit folder: %w", t.id, err)
	}
	return fn(dir)
}

// auditRoot returns the tenant's audit folder, created and opened on first
// use and kept open until the tenant closes: every execution appends.
func (t *Tenant) auditRoot() (*os.Root, error) {
	t.auditMu.Lock()
	defer t.auditMu.Unlock()
	if t.audit != nil {
		return t.audit, nil
	}
	dir, err := t.root.OpenRoot(auditDir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := t.root.Mkdir(auditDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create: %w", err)
		}
		dir, err = t.root.OpenRoot(auditDir)
	}
	if err != nil {
		return nil, err
	}
	t.audit = dir
	return dir, nil
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
