package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ClaimSession records that this replica serves an MCP session of tenant
// (a new session, or one a failed-over client re-initialized).
func (p *Postgres) ClaimSession(ctx context.Context, tenant, session string) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO cexec_leases (session, tenant, replica, updated) VALUES ($1, $2, $3, now())
		ON CONFLICT (session) DO UPDATE SET tenant = $2, replica = $3, updated = now()`, session, tenant, p.replica)
	if err != nil {
		return fmt.Errorf("store: claim session: %w", unreachable(err))
	}
	return nil
}

// ReleaseSession drops this replica's lease of session (the session ended,
// or a reservation was not used). When the database cannot be reached the
// error says so and the heartbeat drops the lease once it can.
func (p *Postgres) ReleaseSession(ctx context.Context, session string) error {
	const del = `DELETE FROM cexec_leases WHERE session = $1 AND replica = $2`
	if _, err := p.pool.Exec(ctx, del, session, p.replica); err != nil {
		p.deleteLater("session lease", del, session, p.replica)
		return fmt.Errorf("store: release session (retried with the heartbeat): %w", unreachable(err))
	}
	return nil
}

// previousRun suffixes the replica of a lease that a previous run of the
// replica held (replica ids have no '.'): no replica of that id is alive.
const previousRun = ".previous"

// SessionOwner returns the replica that holds session's lease and whether
// that replica is alive (connected, and heard from within three
// heartbeats). found is
// false when no replica holds it.
func (p *Postgres) SessionOwner(ctx context.Context, session string) (replica string, live, found bool, err error) {
	err = p.pool.QueryRow(ctx, `SELECT l.replica, coalesce(`+liveSQL("$2")+`, false)
		FROM cexec_leases l LEFT JOIN cexec_replicas r ON r.id = l.replica WHERE l.session = $1`,
		session, p.liveWindow().Seconds()).Scan(&replica, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, false, nil
	}
	if err != nil {
		return "", false, false, fmt.Errorf("store: session owner: %w", unreachable(err))
	}
	return strings.TrimSuffix(replica, previousRun), live, true, nil
}

// AdoptSession moves a session's lease of tenant to this replica when the
// replica that held it is dead, and reports whether it did: a client whose
// replica died continues that session here (its PII vault). Two survivors
// cannot both adopt one session: the update is one statement.
func (p *Postgres) AdoptSession(ctx context.Context, tenant, session string) (bool, error) {
	tag, err := p.pool.Exec(ctx, `UPDATE cexec_leases l SET replica = $3, updated = now()
		WHERE l.session = $1 AND l.tenant = $4 AND l.replica <> $3
		AND NOT EXISTS (SELECT 1 FROM cexec_replicas r WHERE r.id = l.replica AND `+liveSQL("$2")+`)`,
		session, p.liveWindow().Seconds(), p.replica, tenant)
	if err != nil {
		return false, fmt.Errorf("store: adopt session: %w", unreachable(err))
	}
	return tag.RowsAffected() == 1, nil
}

// TenantSessions counts tenant's sessions whose replica is alive.
func (p *Postgres) TenantSessions(ctx context.Context, tenant string) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM cexec_leases l JOIN cexec_replicas r ON r.id = l.replica
		WHERE l.tenant = $1 AND `+liveSQL("$2"), tenant, p.liveWindow().Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count sessions of %s: %w", tenant, unreachable(err))
	}
	return n, nil
}

// pendingPrefix starts the session column of a reservation: a lease of a
// session being opened, counted like one. No session id starts with "_".
const pendingPrefix = "_pending."

// ReserveSession counts tenant's sessions on live replicas and, when
// fewer than max, records a reservation that counts as one more until
// ConfirmSession turns it into the new session's lease or ReleaseSession
// drops it. The count and the insert are one transaction under a
// per-tenant advisory lock, so initializes racing on several replicas
// cannot all pass mcp.max_sessions_per_tenant. reservation is "" when the
// tenant is full; n is the count before the reservation.
func (p *Postgres) ReserveSession(ctx context.Context, tenant string, max int) (reservation string, n int, err error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("store: reserve a session of %s: %w", tenant, unreachable(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cexec-sessions/' || $1))`, tenant); err != nil {
		return "", 0, fmt.Errorf("store: reserve a session of %s: %w", tenant, unreachable(err))
	}
	err = tx.QueryRow(ctx, `SELECT count(*) FROM cexec_leases l JOIN cexec_replicas r ON r.id = l.replica
		WHERE l.tenant = $1 AND `+liveSQL("$2"), tenant, p.liveWindow().Seconds()).Scan(&n)
	if err != nil {
		return "", 0, fmt.Errorf("store: reserve a session of %s: %w", tenant, unreachable(err))
	}
	if n >= max {
		return "", n, nil
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	reservation = pendingPrefix + hex.EncodeToString(b[:])
	if _, err := tx.Exec(ctx, `INSERT INTO cexec_leases (session, tenant, replica, updated) VALUES ($1, $2, $3, now())`,
		reservation, tenant, p.replica); err != nil {
		return "", 0, fmt.Errorf("store: reserve a session of %s: %w", tenant, unreachable(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return "", 0, fmt.Errorf("store: reserve a session of %s: %w", tenant, unreachable(err))
	}
	return reservation, n, nil
}

// ConfirmSession turns this replica's reservation into session's lease,
// in one statement: the count never sees both, nor neither.
func (p *Postgres) ConfirmSession(ctx context.Context, tenant, reservation, session string) error {
	_, err := p.pool.Exec(ctx, `WITH r AS (DELETE FROM cexec_leases WHERE session = $1 AND replica = $3)
		INSERT INTO cexec_leases (session, tenant, replica, updated) VALUES ($2, $4, $3, now())
		ON CONFLICT (session) DO UPDATE SET tenant = $4, replica = $3, updated = now()`,
		reservation, session, p.replica, tenant)
	if err != nil {
		return fmt.Errorf("store: confirm session: %w", unreachable(err))
	}
	return nil
}
