package workspace

import "context"

// SkillRegistry records saved skills where every replica sees them and
// tells the other replicas (core/store's PostgreSQL).
type SkillRegistry interface {
	RegisterSkill(ctx context.Context, tenant, name, description string) error
}
