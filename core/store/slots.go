package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrSlotsFull is AcquireSlot finding a tenant's max executions running
// across the replicas.
var ErrSlotsFull = errors.New("the tenant's executions are at its limit across replicas")

// AcquireSlot takes one of tenant's max concurrent execution slots,
// counted over every live replica, and returns its release. It fails with
// ErrSlotsFull when all are taken. The count and the insert are one step
// under a per-tenant advisory lock.
func (p *Postgres) AcquireSlot(ctx context.Context, tenant string, max int) (release func(), err error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: acquire slot: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cexec-slots/' || $1))`, tenant); err != nil {
		return nil, fmt.Errorf("store: acquire slot: %w", err)
	}
	var n int
	err = tx.QueryRow(ctx, `SELECT count(*) FROM cexec_slots s JOIN cexec_replicas r ON r.id = s.replica
		WHERE s.tenant = $1 AND r.seen > now() - make_interval(secs => $2)`, tenant, p.liveWindow().Seconds()).Scan(&n)
	if err != nil {
		return nil, fmt.Errorf("store: acquire slot: %w", err)
	}
	if n >= max {
		return nil, fmt.Errorf("tenant %s: %d of %d running: %w", tenant, n, max, ErrSlotsFull)
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO cexec_slots (tenant, replica, started) VALUES ($1, $2, now()) RETURNING id`,
		tenant, p.replica).Scan(&id); err != nil {
		return nil, fmt.Errorf("store: acquire slot: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: acquire slot: %w", err)
	}
	return func() {
		// The execution is over whatever its context says: release on a
		// context of its own.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.pool.Exec(ctx, `DELETE FROM cexec_slots WHERE id = $1`, id); err != nil {
			p.log.Warn("release execution slot", "tenant", tenant, "error", err)
		}
	}, nil
}

// AddCounter adds delta to one of tenant's counters (summed over the
// replicas) and returns the new value.
func (p *Postgres) AddCounter(ctx context.Context, tenant, name string, delta int64) (int64, error) {
	var v int64
	err := p.pool.QueryRow(ctx, `INSERT INTO cexec_counters (tenant, name, value) VALUES ($1, $2, $3)
		ON CONFLICT (tenant, name) DO UPDATE SET value = cexec_counters.value + $3 RETURNING value`,
		tenant, name, delta).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("store: counter %s/%s: %w", tenant, name, err)
	}
	return v, nil
}

// Counter returns one of tenant's counters (0 when never added to).
func (p *Postgres) Counter(ctx context.Context, tenant, name string) (int64, error) {
	var v int64
	err := p.pool.QueryRow(ctx, `SELECT coalesce((SELECT value FROM cexec_counters WHERE tenant = $1 AND name = $2), 0)`,
		tenant, name).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("store: counter %s/%s: %w", tenant, name, err)
	}
	return v, nil
}
