package client

import (
	"context"
	"encoding/json"
	"time"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// Workspace calls. tenant "" means the daemon's default tenant. Errors keep
// their gRPC status: status.Code(err) is codes.NotFound for a missing state
// file, session or skill, InvalidArgument for a bad name or value, and
// ResourceExhausted when a write would exceed the tenant's disk quota.

// GetState returns a state file's bytes as stored (JSON or YAML, by the
// name's extension).
func (c *Client) GetState(ctx context.Context, tenant, name string) ([]byte, error) {
	r, err := c.rpc.GetState(ctx, &cexecv1.GetStateRequest{Tenant: tenant, Name: name})
	if err != nil {
		return nil, c.wrap(ctx, "get state "+name, err)
	}
	return r.GetData(), nil
}

// GetStateJSON returns a state file's value as JSON, converting YAML (key
// order and the text of numbers kept).
func (c *Client) GetStateJSON(ctx context.Context, tenant, name string) (json.RawMessage, error) {
	r, err := c.rpc.GetState(ctx, &cexecv1.GetStateRequest{Tenant: tenant, Name: name, AsJson: true})
	if err != nil {
		return nil, c.wrap(ctx, "get state "+name, err)
	}
	return r.GetData(), nil
}

// PutState stores data, already in the format of the name's extension, as
// a state file: atomically and within the tenant's quota, or not at all.
func (c *Client) PutState(ctx context.Context, tenant, name string, data []byte) (*cexecv1.StateInfo, error) {
	r, err := c.rpc.PutState(ctx, &cexecv1.PutStateRequest{Tenant: tenant, Name: name, Data: data})
	if err != nil {
		return nil, c.wrap(ctx, "put state "+name, err)
	}
	return r.GetState(), nil
}

// SaveState stores a JSON value as a state file in the format of the name's
// extension (YAML for .yaml and .yml), with PutState's guarantees.
func (c *Client) SaveState(ctx context.Context, tenant, name string, value json.RawMessage) (*cexecv1.StateInfo, error) {
	r, err := c.rpc.PutState(ctx, &cexecv1.PutStateRequest{Tenant: tenant, Name: name, Data: value, FromJson: true})
	if err != nil {
		return nil, c.wrap(ctx, "save state "+name, err)
	}
	return r.GetState(), nil
}

// ListState lists a tenant's state files, sorted by name.
func (c *Client) ListState(ctx context.Context, tenant string) ([]*cexecv1.StateInfo, error) {
	r, err := c.rpc.ListState(ctx, &cexecv1.ListStateRequest{Tenant: tenant})
	if err != nil {
		return nil, c.wrap(ctx, "list state", err)
	}
	return r.GetStates(), nil
}

// DeleteState removes a state file.
func (c *Client) DeleteState(ctx context.Context, tenant, name string) error {
	if _, err := c.rpc.DeleteState(ctx, &cexecv1.DeleteStateRequest{Tenant: tenant, Name: name}); err != nil {
		return c.wrap(ctx, "delete state "+name, err)
	}
	return nil
}

// ListSessions lists a tenant's sessions, most recently active first.
func (c *Client) ListSessions(ctx context.Context, tenant string) ([]*cexecv1.SessionInfo, error) {
	r, err := c.rpc.ListSessions(ctx, &cexecv1.ListSessionsRequest{Tenant: tenant})
	if err != nil {
		return nil, c.wrap(ctx, "list sessions", err)
	}
	return r.GetSessions(), nil
}

// GetSession returns a session's log entries and how many damaged lines
// were left out.
func (c *Client) GetSession(ctx context.Context, tenant, session string) (*cexecv1.GetSessionResponse, error) {
	r, err := c.rpc.GetSession(ctx, &cexecv1.GetSessionRequest{Tenant: tenant, Session: session})
	if err != nil {
		return nil, c.wrap(ctx, "get session "+session, err)
	}
	return r, nil
}

// ResumeSession returns what an agent needs to pick a session up again: its
// summary, its last checkpoint (unset when none) and its last entries.
func (c *Client) ResumeSession(ctx context.Context, tenant, session string) (*cexecv1.ResumeSessionResponse, error) {
	r, err := c.rpc.ResumeSession(ctx, &cexecv1.ResumeSessionRequest{Tenant: tenant, Session: session})
	if err != nil {
		return nil, c.wrap(ctx, "resume session "+session, err)
	}
	return r, nil
}

// Checkpoint records step and its context (any JSON value; nil means null)
// in a session and returns the entry's sequence number.
func (c *Client) Checkpoint(ctx context.Context, tenant, session, step string, context json.RawMessage) (int64, error) {
	r, err := c.rpc.Checkpoint(ctx, &cexecv1.CheckpointRequest{Tenant: tenant, Session: session, Step: step, ContextJson: context})
	if err != nil {
		return 0, c.wrap(ctx, "checkpoint session "+session, err)
	}
	return r.GetSeq(), nil
}

// ListSkills lists a tenant's skills and the shared ones.
func (c *Client) ListSkills(ctx context.Context, tenant string) ([]*cexecv1.Skill, error) {
	r, err := c.rpc.ListSkills(ctx, &cexecv1.ListSkillsRequest{Tenant: tenant})
	if err != nil {
		return nil, c.wrap(ctx, "list skills", err)
	}
	return r.GetSkills(), nil
}

// GetSkill returns a skill with its instructions and code.
func (c *Client) GetSkill(ctx context.Context, tenant, name string) (*cexecv1.Skill, error) {
	r, err := c.rpc.GetSkill(ctx, &cexecv1.GetSkillRequest{Tenant: tenant, Name: name})
	if err != nil {
		return nil, c.wrap(ctx, "get skill "+name, err)
	}
	return r.GetSkill(), nil
}

// SaveSkill creates or replaces one of the tenant's skills. Code that does
// not compile is refused (InvalidArgument, naming the line).
func (c *Client) SaveSkill(ctx context.Context, tenant, name, description, code string) (*cexecv1.Skill, error) {
	r, err := c.rpc.SaveSkill(ctx, &cexecv1.SaveSkillRequest{Tenant: tenant, Name: name, Description: description, Code: code})
	if err != nil {
		return nil, c.wrap(ctx, "save skill "+name, err)
	}
	return r.GetSkill(), nil
}

// ListTenants lists declared tenants and those with a workspace.
func (c *Client) ListTenants(ctx context.Context) ([]*cexecv1.TenantInfo, error) {
	r, err := c.rpc.ListTenants(ctx, &cexecv1.ListTenantsRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "list tenants", err)
	}
	return r.GetTenants(), nil
}

// GCTenants removes undeclared tenants unused for longer than olderThan,
// or with dryRun only lists them.
func (c *Client) GCTenants(ctx context.Context, olderThan time.Duration, dryRun bool) ([]*cexecv1.TenantInfo, error) {
	r, err := c.rpc.GCTenants(ctx, &cexecv1.GCTenantsRequest{OlderThanMs: olderThan.Milliseconds(), DryRun: dryRun})
	if err != nil {
		return nil, c.wrap(ctx, "gc tenants", err)
	}
	return r.GetRemoved(), nil
}
