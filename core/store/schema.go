package store

import (
	"context"
	"fmt"
)

// schemaLock is the advisory lock key replicas take to create the schema.
const schemaLock = 0x63657865 // "cexe"

const schema = `
CREATE TABLE IF NOT EXISTS cexec_replicas (
	id   text PRIMARY KEY,
	seen timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS cexec_leases (
	session text PRIMARY KEY,
	tenant  text NOT NULL,
	replica text NOT NULL,
	updated timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS cexec_leases_tenant ON cexec_leases (tenant);
CREATE TABLE IF NOT EXISTS cexec_slots (
	id      bigserial PRIMARY KEY,
	tenant  text NOT NULL,
	replica text NOT NULL,
	started timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS cexec_slots_tenant ON cexec_slots (tenant);
CREATE TABLE IF NOT EXISTS cexec_vaults (
	tenant  text NOT NULL,
	session text NOT NULL,
	sealed  bytea NOT NULL,
	updated timestamptz NOT NULL,
	PRIMARY KEY (tenant, session)
);
CREATE TABLE IF NOT EXISTS cexec_skills (
	tenant      text NOT NULL,
	name        text NOT NULL,
	description text NOT NULL,
	replica     text NOT NULL,
	updated     timestamptz NOT NULL,
	PRIMARY KEY (tenant, name)
);
CREATE TABLE IF NOT EXISTS cexec_approvals (
	id        text PRIMARY KEY,
	replica   text NOT NULL,
	tenant    text NOT NULL,
	session   text NOT NULL,
	server    text NOT NULL,
	tool      text NOT NULL,
	arguments text NOT NULL,
	reason    text NOT NULL,
	created   timestamptz NOT NULL,
	deadline  timestamptz,
	decision  boolean
);
CREATE TABLE IF NOT EXISTS cexec_usage (
	tenant   text PRIMARY KEY,
	bytes    bigint NOT NULL,
	gen      bigint NOT NULL,
	measured timestamptz NOT NULL
);
`

func (p *Postgres) migrate(ctx context.Context) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: create schema: %w", unreachable(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
		return fmt.Errorf("store: create schema: %w", unreachable(err))
	}
	if _, err := tx.Exec(ctx, schema); err != nil {
		return fmt.Errorf("store: create schema: %w", unreachable(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: create schema: %w", unreachable(err))
	}
	return nil
}
