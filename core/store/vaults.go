package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TopicVault is the notification of a vault saved or deleted; its payload
// is "tenant/session".
const TopicVault = "vault"

// LoadVault returns a session's vault as the vault package encoded it, or
// nil when there is none. A row that does not open under the key (another
// key, or tampered with) is an error, never an empty vault.
func (p *Postgres) LoadVault(ctx context.Context, tenant, session string) ([]byte, error) {
	var sealed []byte
	err := p.pool.QueryRow(ctx, `SELECT sealed FROM cexec_vaults WHERE tenant = $1 AND session = $2`, tenant, session).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: load vault %s/%s: %w", tenant, session, unreachable(err))
	}
	ns := p.aead.NonceSize()
	if len(sealed) < ns {
		return nil, fmt.Errorf("store: vault %s/%s is corrupt", tenant, session)
	}
	data, err := p.aead.Open(nil, sealed[:ns], sealed[ns:], vaultAAD(tenant, session))
	if err != nil {
		return nil, fmt.Errorf("store: vault %s/%s does not decrypt (another vault_key?)", tenant, session)
	}
	return data, nil
}

// SaveVault stores a session's vault, encrypted, and tells the other
// replicas to drop their copy.
func (p *Postgres) SaveVault(ctx context.Context, tenant, session string, data []byte) error {
	nonce := make([]byte, p.aead.NonceSize(), p.aead.NonceSize()+len(data)+p.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("store: save vault: %w", unreachable(err))
	}
	sealed := p.aead.Seal(nonce, nonce, data, vaultAAD(tenant, session))
	_, err := p.pool.Exec(ctx, `INSERT INTO cexec_vaults (tenant, session, sealed, updated) VALUES ($1, $2, $3, now())
		ON CONFLICT (tenant, session) DO UPDATE SET sealed = $3, updated = now()`, tenant, session, sealed)
	if err != nil {
		return fmt.Errorf("store: save vault %s/%s: %w", tenant, session, unreachable(err))
	}
	p.notifyQuiet(ctx, TopicVault, tenant+"/"+session)
	return nil
}

// DeleteVault removes a session's vault; a missing one is not an error.
func (p *Postgres) DeleteVault(ctx context.Context, tenant, session string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM cexec_vaults WHERE tenant = $1 AND session = $2`, tenant, session); err != nil {
		return fmt.Errorf("store: delete vault %s/%s: %w", tenant, session, unreachable(err))
	}
	p.notifyQuiet(ctx, TopicVault, tenant+"/"+session)
	return nil
}

func vaultAAD(tenant, session string) []byte {
	return []byte("cexec-vault\x00" + tenant + "\x00" + session)
}
