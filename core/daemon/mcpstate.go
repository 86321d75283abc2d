package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/workspace"
)

// stateView is the tenant's state through the face. Values the agent saves
// may hold tokens it was shown; they are stored with the real values.
type stateView struct {
	ws  *workspace.Manager
	pii *sessionVaults
}

// ListState lists the tenant's state files.
func (v stateView) ListState(_ context.Context, sc mcpface.Scope) ([]mcpface.StateFile, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	files, err := t.ListState()
	if err != nil {
		return nil, err
	}
	out := make([]mcpface.StateFile, len(files))
	for i, f := range files {
		out[i] = mcpface.StateFile{Name: f.Name, Size: f.Size, Modified: f.Modified}
	}
	return out, nil
}

// GetState returns a state value as JSON.
func (v stateView) GetState(_ context.Context, sc mcpface.Scope, name string) (json.RawMessage, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	return t.GetState(name)
}

// LoadState returns a state value as JSON and its version.
func (v stateView) LoadState(_ context.Context, sc mcpface.Scope, name string) (json.RawMessage, string, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, "", err
	}
	return t.LoadState(name)
}

// SaveState stores a value, its tokens restored.
func (v stateView) SaveState(ctx context.Context, sc mcpface.Scope, name string, value json.RawMessage) error {
	return v.save(ctx, sc, name, value, nil)
}

// SaveStateIf stores a value, its tokens restored, while the stored one is
// at version.
func (v stateView) SaveStateIf(ctx context.Context, sc mcpface.Scope, name string, value json.RawMessage, version string) error {
	err := v.save(ctx, sc, name, value, &version)
	if errors.Is(err, workspace.ErrStateConflict) {
		return fmt.Errorf("%w: %w", mcpface.ErrStateConflict, err)
	}
	return err
}

func (v stateView) save(ctx context.Context, sc mcpface.Scope, name string, value json.RawMessage, version *string) error {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return err
	}
	if v.pii != nil {
		s, err := v.pii.session(ctx, sc)
		if err != nil {
			return err
		}
		if value, err = s.UntokenizeJSON(value); err != nil {
			return err
		}
	}
	if version != nil {
		_, err = t.SaveStateIf(name, value, *version)
	} else {
		_, err = t.SaveState(name, value)
	}
	return err
}

// skillView is the tenant's skills and the shared ones through the face.
type skillView struct {
	ws  *workspace.Manager
	pii *sessionVaults
}

func faceSkill(s workspace.Skill) mcpface.Skill {
	return mcpface.Skill{Name: s.Name, Description: s.Description, Import: s.Import, Shared: s.Shared,
		Instructions: s.Instructions, Code: s.Code}
}

// ListSkills lists the skills the tenant can import.
func (v skillView) ListSkills(_ context.Context, sc mcpface.Scope) ([]mcpface.Skill, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	skills, err := t.ListSkills()
	if err != nil {
		return nil, err
	}
	out := make([]mcpface.Skill, len(skills))
	for i, s := range skills {
		out[i] = faceSkill(s)
	}
	return out, nil
}

// BrokenSkills lists the tenant's skill folders that do not make a skill.
func (v skillView) BrokenSkills(_ context.Context, sc mcpface.Scope) ([]mcpface.Skill, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	broken, err := t.BrokenSkills()
	if err != nil {
		return nil, err
	}
	out := make([]mcpface.Skill, len(broken))
	for i, s := range broken {
		out[i] = mcpface.Skill{Name: s.Name, Problem: s.Problem}
	}
	return out, nil
}

// GetSkill returns one skill with its instructions and code.
func (v skillView) GetSkill(_ context.Context, sc mcpface.Scope, name string) (mcpface.Skill, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return mcpface.Skill{}, err
	}
	s, err := t.GetSkill(name)
	if err != nil {
		return mcpface.Skill{}, err
	}
	return faceSkill(s), nil
}

// SaveSkill stores a tenant skill. Tokens in its code are restored: the
// skill outlives the session whose vault knows them.
func (v skillView) SaveSkill(ctx context.Context, sc mcpface.Scope, name, description, code string) (mcpface.Skill, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return mcpface.Skill{}, err
	}
	if v.pii != nil {
		s, err := v.pii.session(ctx, sc)
		if err != nil {
			return mcpface.Skill{}, err
		}
		if code, err = s.Vault().UntokenizePython(code); err != nil {
			return mcpface.Skill{}, err
		}
	}
	s, err := t.SaveSkill(ctx, name, description, code)
	if err != nil {
		return mcpface.Skill{}, err
	}
	return faceSkill(s), nil
}
