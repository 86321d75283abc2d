package store

import (
	"context"
	"fmt"
	"time"
)

// AcquireSlot takes one of tenant's max concurrent execution slots,
// counted over every live replica, and returns its release; full reports
// that all are taken. The count and the insert are one step
// under a per-tenant advisory lock.
func (p *Postgres) AcquireSlot(ctx context.Context, tenant string, max int) (release func(), full bool, err error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("store: acquire slot: %w", unreachable(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cexec-slots/' || $1))`, tenant); err != nil {
		return nil, false, fmt.Errorf("store: acquire slot: %w", unreachable(err))
	}
	var n int
	err = tx.QueryRow(ctx, `SELECT count(*) FROM cexec_slots s JOIN cexec_replicas r ON r.id = s.replica
		WHERE s.tenant = $1 AND `+liveSQL("$2"), tenant, p.liveWindow().Seconds()).Scan(&n)
	if err != nil {
		return nil, false, fmt.Errorf("store: acquire slot: %w", unreachable(err))
	}
	if n >= max {
		return nil, true, nil
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO cexec_slots (tenant, replica, started) VALUES ($1, $2, now()) RETURNING id`,
		tenant, p.replica).Scan(&id); err != nil {
		return nil, false, fmt.Errorf("store: acquire slot: %w", unreachable(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("store: acquire slot: %w", unreachable(err))
	}
	return func() {
		// The execution is over whatever its context says: release on a
		// context of its own.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const del = `DELETE FROM cexec_slots WHERE id = $1`
		if _, err := p.pool.Exec(ctx, del, id); err != nil {
			p.log.Warn("release execution slot; retrying with the heartbeat", "tenant", tenant, "error", err)
			p.deleteLater("execution slot of "+tenant, del, id)
		}
	}, false, nil
}
