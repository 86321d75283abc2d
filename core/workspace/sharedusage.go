package workspace

import (
	"context"
	"fmt"
	"time"

	"github.com/cexec/cexec/internal/bytesize"
)

// SharedUsage keeps each tenant's measured disk usage where every replica
// sharing a data_dir reads and updates it (core/store's PostgreSQL). The
// figure is the last walk of the tenant's folder, by any replica, plus
// what host writes added since; a replica that reserved bytes and died
// before writing them inflates it until the next walk replaces it.
type SharedUsage interface {
	// TenantUsage returns the figure and its measurement generation; gen
	// 0 means nobody measured the tenant yet.
	TenantUsage(ctx context.Context, tenant string) (bytes, gen int64, err error)
	// AddUsage adds delta when the sum stays within limit (delta <= 0 or
	// limit <= 0: always), atomically; ok false: refused; measured false:
	// no figure yet, nothing added.
	AddUsage(ctx context.Context, tenant string, delta, limit int64) (bytes int64, ok, measured bool, err error)
	// RecordUsage stores a walk that measured walked bytes and began at
	// figure base, generation gen; it returns the figure now stored, and
	// landed false when another walk was recorded since gen (this one was
	// dropped).
	RecordUsage(ctx context.Context, tenant string, walked, base, gen int64) (bytes int64, landed bool, err error)
	// ForgetUsage drops a removed tenant's figure.
	ForgetUsage(ctx context.Context, tenant string) error
}

// usageTimeout bounds one call to the shared usage; like slotTimeout, an
// execution must not hang on a stalled database.
const usageTimeout = 10 * time.Second

// sharedUsage is Options.Usage for a measured tenant, else nil: a tenant
// in image mode is held by its image's size.
func (t *Tenant) sharedUsage() SharedUsage {
	if t.mode == DiskModeImage {
		return nil
	}
	return t.m.opts.Usage
}

// measureShared walks the workspace and records the result in the shared
// figure, which it returns (and caches as t.usage for metrics). A walk
// another replica's overtook is made again: that one may have begun before
// a file was removed (an execution's accountant, started as the program
// ended), and would otherwise stand until the next measurement, which for
// a tenant refused as over its quota may not come.
func (t *Tenant) measureShared(u SharedUsage) (int64, error) {
	var bytes int64
	for range maxWalks {
		b, landed, err := t.walkShared(u)
		if err != nil {
			return 0, err
		}
		bytes = b
		if landed {
			break
		}
	}
	t.mu.Lock()
	t.usage, t.usageKnown = bytes, true
	t.mu.Unlock()
	return bytes, nil
}

// maxWalks bounds measureShared's walks while other replicas' keep
// overtaking them; the figure is then the last of theirs.
const maxWalks = 3

// walkShared is one walk recorded in the shared figure.
func (t *Tenant) walkShared(u SharedUsage) (bytes int64, landed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), usageTimeout)
	defer cancel()
	base, gen, err := u.TenantUsage(ctx, t.id)
	if err != nil {
		return 0, false, err
	}
	walked, err := walkUsage(t.ws)
	if err != nil {
		return 0, false, err
	}
	// The walk may take long: the record gets a fresh bound.
	rctx, rcancel := context.WithTimeout(context.Background(), usageTimeout)
	defer rcancel()
	return u.RecordUsage(rctx, t.id, walked, base, gen)
}

// sharedFigure reads the shared figure for the quota check before an
// execution; known is false while nobody measured the tenant.
func (t *Tenant) sharedFigure(u SharedUsage) (bytes int64, known bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), usageTimeout)
	defer cancel()
	bytes, gen, err := u.TenantUsage(ctx, t.id)
	if err != nil {
		return 0, false, fmt.Errorf("tenant %s: read disk usage across replicas: %w", t.id, err)
	}
	if gen == 0 {
		return 0, false, nil
	}
	t.mu.Lock()
	t.usage, t.usageKnown = bytes, true
	t.mu.Unlock()
	return bytes, true, nil
}

// reserveShared adds a host write's growth to the shared figure when it
// fits the quota, in one step across replicas. Called with t.wmu held;
// wrote settles the reservation once the write is done. A reservation
// left by a write that failed is given back by the next one.
func (t *Tenant) reserveShared(u SharedUsage, what string, oldSize, newSize, quota int64) error {
	t.mu.Lock()
	known := t.usageKnown
	t.mu.Unlock()
	if !known {
		// This replica's first look at the tenant: measure, as a single
		// cexecd does, which also corrects a figure left by a dead one.
		if _, err := t.measureShared(u); err != nil {
			return fmt.Errorf("measure workspace: %w", err)
		}
	}
	delta := newSize - oldSize
	ctx, cancel := context.WithTimeout(context.Background(), usageTimeout)
	defer cancel()
	for range 2 {
		bytes, ok, measured, err := u.AddUsage(ctx, t.id, delta-t.reserved, quota)
		switch {
		case err != nil:
			return fmt.Errorf("tenant %s: reserve disk across replicas: %w", t.id, err)
		case ok:
			t.reserved = delta
			return nil
		case measured:
			return fmt.Errorf("tenant %s: writing %s (%s) would bring the workspace to %s, over its %s disk quota; nothing was written: %w",
				t.id, what, bytesize.Format(newSize), bytesize.Format(bytes-t.reserved+delta), bytesize.Format(quota), ErrQuotaExceeded)
		}
		// GC forgot the figure meanwhile: measure and try once more.
		if _, err := t.measureShared(u); err != nil {
			return fmt.Errorf("measure workspace: %w", err)
		}
	}
	return fmt.Errorf("tenant %s: reserve disk across replicas: no figure after measuring", t.id)
}

// settleShared brings the shared figure to a finished write's delta: what
// its reservation did not already add. Called with t.wmu held.
func (t *Tenant) settleShared(u SharedUsage, delta int64) {
	d := delta - t.reserved
	t.reserved = 0
	if d == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), usageTimeout)
	defer cancel()
	if _, _, _, err := u.AddUsage(ctx, t.id, d, 0); err != nil {
		t.m.log.Warn("record a write in the disk usage across replicas; the next measurement corrects it", "tenant", t.id, "error", err)
	}
}

// forgetSharedUsage drops a removed tenant's shared figure.
func (m *Manager) forgetSharedUsage(ctx context.Context, id string) {
	if m.opts.Usage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, usageTimeout)
	defer cancel()
	if err := m.opts.Usage.ForgetUsage(ctx, id); err != nil {
		m.log.Warn("forget a removed tenant's disk usage across replicas", "tenant", id, "error", err)
	}
}
