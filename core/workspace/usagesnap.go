package workspace

import "github.com/cexec/cexec/core/workspace/diskimage"

// UsageSnapshot is a loaded tenant's disk use as known without walking its
// folder, for metrics scraped every few seconds.
type UsageSnapshot struct {
	Tenant string
	// Bytes and Files are what it stores; Files is -1 when measured (only
	// images count files), Bytes -1 when not measured yet.
	Bytes, Files int64
	// QuotaBytes and MaxFiles are its limits; 0 is unlimited.
	QuotaBytes, MaxFiles int64
}

// LoadedUsage returns the usage of every loaded tenant: in image mode one
// statfs each, measured the accountant's last figure (never a walk).
func (m *Manager) LoadedUsage() []UsageSnapshot {
	m.mu.Lock()
	ts := make([]*Tenant, 0, len(m.tenants))
	for _, t := range m.tenants {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	out := make([]UsageSnapshot, 0, len(ts))
	for _, t := range ts {
		s := UsageSnapshot{Tenant: t.id, Bytes: -1, Files: -1, QuotaBytes: t.Quota().DiskBytes, MaxFiles: t.Quota().MaxFiles}
		if t.mode == DiskModeImage {
			if err := t.enter(); err != nil {
				continue
			}
			u, err := diskimage.UsageOf(t.dir)
			t.exit()
			if err != nil {
				continue
			}
			s.Bytes, s.Files = u.Bytes, u.Files
			l := t.Quota().limits()
			s.QuotaBytes, s.MaxFiles = l.Bytes, l.Files
		} else {
			t.mu.Lock()
			if t.usageKnown {
				s.Bytes = t.usage
			}
			t.mu.Unlock()
		}
		out = append(out, s)
	}
	return out
}
