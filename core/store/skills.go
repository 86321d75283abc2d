package store

import (
	"context"
	"fmt"
)

// TopicSkills is the notification of a tenant's skill saved; its payload
// is the tenant.
const TopicSkills = "skills"

// RegisterSkill records a tenant's saved skill (which replica saved it,
// when) and tells the other replicas, which refresh their search index.
func (p *Postgres) RegisterSkill(ctx context.Context, tenant, name, description string) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO cexec_skills (tenant, name, description, replica, updated) VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (tenant, name) DO UPDATE SET description = $3, replica = $4, updated = now()`, tenant, name, description, p.replica)
	if err != nil {
		return fmt.Errorf("store: register skill %s/%s: %w", tenant, name, unreachable(err))
	}
	p.notifyQuiet(ctx, TopicSkills, tenant)
	return nil
}
