package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A tenant's disk usage in cexec_usage is one figure every replica reads
// and writes: the last measurement of its shared folder (a walk, by
// whichever replica ran it) plus what host writes reserved since. It is
// never per replica, so a reservation a replica made and did not use (it
// crashed before the write) costs nothing lasting: the next walk replaces
// it. gen counts measurements, so that a walk that overlapped another's
// does not land on top of a newer figure.

// TenantUsage returns tenant's shared disk usage in bytes and its
// measurement generation; gen is 0 when no replica has measured it yet.
func (p *Postgres) TenantUsage(ctx context.Context, tenant string) (bytes, gen int64, err error) {
	err = p.pool.QueryRow(ctx, `SELECT bytes, gen FROM cexec_usage WHERE tenant = $1`, tenant).Scan(&bytes, &gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("store: disk usage of %s: %w", tenant, unreachable(err))
	}
	return bytes, gen, nil
}

// AddUsage adds delta bytes to tenant's usage when the sum stays within
// limit, in one statement, so that replicas writing at once cannot both
// pass the check. A delta <= 0 or a limit <= 0 always adds. ok is false when
// the addition would cross the limit (nothing added); measured is false
// when no replica has measured the tenant yet (nothing added: measure
// first). bytes is the figure after the call either way.
func (p *Postgres) AddUsage(ctx context.Context, tenant string, delta, limit int64) (bytes int64, ok, measured bool, err error) {
	err = p.pool.QueryRow(ctx, `UPDATE cexec_usage SET bytes = greatest(bytes + $2, 0) WHERE tenant = $1
		AND ($2 <= 0 OR $3 <= 0 OR bytes + $2 <= $3) RETURNING bytes`, tenant, delta, limit).Scan(&bytes)
	if err == nil {
		return bytes, true, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, false, fmt.Errorf("store: reserve disk for %s: %w", tenant, unreachable(err))
	}
	bytes, gen, err := p.TenantUsage(ctx, tenant)
	if err != nil {
		return 0, false, false, err
	}
	return bytes, false, gen > 0, nil
}

// RecordUsage stores a walk of tenant's folder that measured walked bytes
// and started when the figure was base at generation gen (TenantUsage):
// the new figure is walked plus what host writes added during the walk
// (which the walk may have seen too: the figure errs high, never low). A
// walk that another replica's measurement overtook is dropped (landed
// false): the two overlapped, and either may have seen the older folder.
// It returns the figure stored now.
func (p *Postgres) RecordUsage(ctx context.Context, tenant string, walked, base, gen int64) (bytes int64, landed bool, err error) {
	err = p.pool.QueryRow(ctx, `INSERT INTO cexec_usage AS u (tenant, bytes, gen, measured) VALUES ($1, $2, 1, now())
		ON CONFLICT (tenant) DO UPDATE SET bytes = greatest($2 + u.bytes - $3, 0), gen = u.gen + 1, measured = now()
		WHERE u.gen = $4 RETURNING bytes`, tenant, walked, base, gen).Scan(&bytes)
	landed = err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		bytes, _, err = p.TenantUsage(ctx, tenant)
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: record disk usage of %s: %w", tenant, unreachable(err))
	}
	return bytes, landed, nil
}

// ForgetUsage drops tenant's figure (GC removed the tenant): a tenant of
// that name created later starts unmeasured, not with the old one's bytes.
func (p *Postgres) ForgetUsage(ctx context.Context, tenant string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM cexec_usage WHERE tenant = $1`, tenant); err != nil {
		return fmt.Errorf("store: forget disk usage of %s: %w", tenant, unreachable(err))
	}
	return nil
}
