package store

import (
	"context"
	"fmt"
	"time"
)

// TopicSkills is the notification of a tenant's skill saved; its payload
// is the tenant.
const TopicSkills = "skills"

// SkillEntry is a skill in the registry.
type SkillEntry struct {
	Name        string
	Description string
	// Replica saved it, at Updated.
	Replica string
	Updated time.Time
}

// RegisterSkill records a tenant's saved skill and tells the other
// replicas, whose skill lists and search index are then stale.
func (p *Postgres) RegisterSkill(ctx context.Context, tenant, name, description string) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO cexec_skills (tenant, name, description, replica, updated) VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (tenant, name) DO UPDATE SET description = $3, replica = $4, updated = now()`, tenant, name, description, p.replica)
	if err != nil {
		return fmt.Errorf("store: register skill %s/%s: %w", tenant, name, err)
	}
	p.notifyQuiet(ctx, TopicSkills, tenant)
	return nil
}

// Skills lists a tenant's registered skills by name.
func (p *Postgres) Skills(ctx context.Context, tenant string) ([]SkillEntry, error) {
	rows, err := p.pool.Query(ctx, `SELECT name, description, replica, updated FROM cexec_skills WHERE tenant = $1 ORDER BY name`, tenant)
	if err != nil {
		return nil, fmt.Errorf("store: skills of %s: %w", tenant, err)
	}
	defer rows.Close()
	var out []SkillEntry
	for rows.Next() {
		var s SkillEntry
		if err := rows.Scan(&s.Name, &s.Description, &s.Replica, &s.Updated); err != nil {
			return nil, fmt.Errorf("store: skills of %s: %w", tenant, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: skills of %s: %w", tenant, err)
	}
	return out, nil
}
