package workspace

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cexec/cexec/pluginapi"
)

// uids is the allocation of tenant uids from Options.TenantUIDs. Called
// with m.mu held.
type uids struct {
	loaded bool
	used   map[uint32]string // uid -> tenant
	// last is the uid allocated last: the next one is searched above it
	// (wrapping around), so that a removed tenant's uid goes to a new
	// tenant only once the rest of the range is taken, long after the
	// removed tenant's sandboxes are gone.
	last uint32
}

// load reads the uids of every tenant folder once.
func (m *Manager) loadUIDs() {
	u := &m.uids
	if u.loaded {
		return
	}
	u.loaded, u.used = true, map[uint32]string{}
	names, _ := readDirNames(m.dir)
	for _, id := range names {
		if ValidateTenantID(id) != nil {
			continue
		}
		root, err := os.OpenRoot(filepath.Join(m.dir, id))
		if err != nil {
			continue
		}
		if meta, err := readTenantMeta(root); err == nil && meta.UID != nil {
			u.used[*meta.UID] = id
			u.last = max(u.last, *meta.UID)
		}
		root.Close()
	}
}

// allocateUID gives tenant id the next free uid of the range. Called with
// m.mu held.
func (m *Manager) allocateUID(id string) (uint32, error) {
	m.loadUIDs()
	r, u := m.opts.TenantUIDs, &m.uids
	next := u.last + 1
	for range r.Size() {
		if next < r.First || next > r.Last {
			next = r.First
		}
		if _, taken := u.used[next]; !taken {
			u.used[next], u.last = id, next
			return next, nil
		}
		next++
	}
	return 0, fmt.Errorf("allocate uid for tenant %s: all %d uids of tenant_uids (%d-%d) belong to other tenants; widen the range or remove unused tenants (cexecctl tenants gc): %w",
		id, r.Size(), r.First, r.Last, pluginapi.ErrResourceExhausted)
}

// releaseUID frees a removed tenant's uid. Called with m.mu held.
func (m *Manager) releaseUID(id string) {
	for uid, owner := range m.uids.used {
		if owner == id {
			delete(m.uids.used, uid)
		}
	}
}
