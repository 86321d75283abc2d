package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
)

// Workspaces is the view of the tenants' workspaces (core/workspace's
// Manager) the state, session, skill and tenant RPCs need.
type Workspaces interface {
	// Tenant returns a tenant's handle, creating its folders on first use.
	Tenant(id string) (*workspace.Tenant, error)
	// Lookup returns a tenant's handle when the tenant is declared or was
	// used, else workspace.ErrNoTenant.
	Lookup(id string) (*workspace.Tenant, error)
	// SharedSkills, SharedSkill and SharedWorkflows are the skills and
	// workflows of a tenant never used.
	SharedSkills() []workspace.Skill
	SharedSkill(name string) (workspace.Skill, error)
	SharedWorkflows() []workspace.StoredWorkflow
	// Tenants lists declared tenants and those with a folder.
	Tenants(ctx context.Context) ([]workspace.TenantInfo, error)
	// GC removes undeclared, idle tenants unused for longer than olderThan.
	GC(ctx context.Context, olderThan time.Duration, dryRun bool) ([]workspace.GCEntry, error)
}

// tenant resolves a request's tenant; "" is the daemon's default tenant.
// The tenant comes only from the request, so one tenant's calls never touch
// another's folder.
func (s *Server) tenant(id string) (*workspace.Tenant, error) {
	if s.d.Workspaces == nil {
		return nil, status.Error(codes.Unimplemented, "workspaces are not wired into this cexecd")
	}
	if id == "" {
		id = s.d.DefaultTenant
	}
	t, err := s.d.Workspaces.Tenant(id)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return t, nil
}

// existing resolves a read-only request's tenant like tenant, but creates
// none but the default and declared ones: an id never used (a mistyped
// --tenant) answers workspace.ErrNoTenant, which listings take as an empty
// tenant. Errors are to pass through pluginapi.ToStatus.
func (s *Server) existing(id string) (*workspace.Tenant, error) {
	if s.d.Workspaces == nil {
		return nil, status.Error(codes.Unimplemented, "workspaces are not wired into this cexecd")
	}
	return existingTenant(s.d.Workspaces, s.d.DefaultTenant, id)
}

// existingTenant is the tenant id names ("" the default), opened without
// creating any but the default and declared ones, or workspace.ErrNoTenant.
func existingTenant(ws Workspaces, defaultTenant, id string) (*workspace.Tenant, error) {
	if id == "" || id == defaultTenant {
		// The default tenant exists before its first use, as declared ones do.
		return ws.Tenant(defaultTenant)
	}
	return ws.Lookup(id)
}

// GetState returns a state file as stored, or its value as JSON.
func (s *Server) GetState(_ context.Context, req *cexecv1.GetStateRequest) (*cexecv1.GetStateResponse, error) {
	t, err := s.existing(req.GetTenant())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	var data []byte
	if req.GetAsJson() {
		data, err = t.GetState(req.GetName())
	} else {
		data, err = t.GetStateFile(req.GetName())
	}
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &cexecv1.GetStateResponse{Data: data}, nil
}

// PutState stores a state file atomically, within the size limit and the
// tenant's disk quota; on error nothing was written.
func (s *Server) PutState(_ context.Context, req *cexecv1.PutStateRequest) (*cexecv1.PutStateResponse, error) {
	t, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	var info workspace.StateInfo
	if req.GetFromJson() {
		info, err = t.SaveState(req.GetName(), req.GetData())
	} else {
		info, err = t.PutStateFile(req.GetName(), req.GetData())
	}
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	s.d.Log.Debug("state saved", "tenant", t.ID(), "name", info.Name, "bytes", info.Size)
	return &cexecv1.PutStateResponse{State: stateProto(info)}, nil
}

// ListState lists the tenant's state files.
func (s *Server) ListState(_ context.Context, req *cexecv1.ListStateRequest) (*cexecv1.ListStateResponse, error) {
	t, err := s.existing(req.GetTenant())
	if errors.Is(err, workspace.ErrNoTenant) {
		return &cexecv1.ListStateResponse{}, nil
	}
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	infos, err := t.ListState()
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &cexecv1.ListStateResponse{States: make([]*cexecv1.StateInfo, 0, len(infos))}
	for _, i := range infos {
		out.States = append(out.States, stateProto(i))
	}
	return out, nil
}

// DeleteState removes a state file; deleting is allowed over quota.
func (s *Server) DeleteState(_ context.Context, req *cexecv1.DeleteStateRequest) (*cexecv1.DeleteStateResponse, error) {
	t, err := s.existing(req.GetTenant())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	if err := t.DeleteState(req.GetName()); err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	s.d.Log.Debug("state deleted", "tenant", t.ID(), "name", req.GetName())
	return &cexecv1.DeleteStateResponse{}, nil
}

func stateProto(i workspace.StateInfo) *cexecv1.StateInfo {
	return &cexecv1.StateInfo{Name: i.Name, Bytes: i.Size, ModifiedUnixMs: i.Modified.UnixMilli(), Format: i.Format}
}

// ListSessions lists the tenant's sessions, most recently active first.
func (s *Server) ListSessions(_ context.Context, req *cexecv1.ListSessionsRequest) (*cexecv1.ListSessionsResponse, error) {
	t, err := s.existing(req.GetTenant())
	if errors.Is(err, workspace.ErrNoTenant) {
		return &cexecv1.ListSessionsResponse{}, nil
	}
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	infos, err := t.ListSessions()
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &cexecv1.ListSessionsResponse{Sessions: make([]*cexecv1.SessionInfo, 0, len(infos))}
	for _, i := range infos {
		out.Sessions = append(out.Sessions, sessionProto(i))
	}
	return out, nil
}

// GetSession returns a session's log, leaving out lines that cannot be
// read (and counting them).
func (s *Server) GetSession(_ context.Context, req *cexecv1.GetSessionRequest) (*cexecv1.GetSessionResponse, error) {
	t, err := s.existing(req.GetTenant())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	log, err := t.ReadSession(req.GetSession())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &cexecv1.GetSessionResponse{Entries: entriesProto(log.Entries), Skipped: int32(len(log.Problems))}, nil
}

// ResumeSession returns what an agent needs to pick a session up again: its
// summary, last checkpoint and last entries.
func (s *Server) ResumeSession(_ context.Context, req *cexecv1.ResumeSessionRequest) (*cexecv1.ResumeSessionResponse, error) {
	t, err := s.existing(req.GetTenant())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	r, err := t.Resume(req.GetSession())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &cexecv1.ResumeSessionResponse{Session: sessionProto(r.Session), Recent: entriesProto(r.Recent)}
	if r.Checkpoint != nil {
		out.Checkpoint = entryProto(r.Checkpoint)
	}
	return out, nil
}

// Checkpoint records a step and its context in a session, creating the
// session on first use.
func (s *Server) Checkpoint(_ context.Context, req *cexecv1.CheckpointRequest) (*cexecv1.CheckpointResponse, error) {
	t, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	if req.GetSession() == "" {
		return nil, status.Error(codes.InvalidArgument, "checkpoint: name the session")
	}
	ctxJSON := req.GetContextJson()
	if len(bytes.TrimSpace(ctxJSON)) > 0 && !json.Valid(ctxJSON) {
		return nil, status.Error(codes.InvalidArgument, "checkpoint: the context is not valid JSON")
	}
	e, err := t.Checkpoint(req.GetSession(), req.GetStep(), ctxJSON)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &cexecv1.CheckpointResponse{Session: req.GetSession(), Seq: e.Seq}, nil
}

// ListSkills lists the tenant's skills and the shared ones.
func (s *Server) ListSkills(_ context.Context, req *cexecv1.ListSkillsRequest) (*cexecv1.ListSkillsResponse, error) {
	t, err := s.existing(req.GetTenant())
	var skills []workspace.Skill
	switch {
	case errors.Is(err, workspace.ErrNoTenant):
		skills = s.d.Workspaces.SharedSkills()
	case err != nil:
		return nil, pluginapi.ToStatus(err)
	default:
		if skills, err = t.ListSkills(); err != nil {
			return nil, pluginapi.ToStatus(err)
		}
		broken, err := t.BrokenSkills()
		if err != nil {
			return nil, pluginapi.ToStatus(err)
		}
		skills = append(skills, broken...)
		slices.SortStableFunc(skills, func(a, b workspace.Skill) int { return strings.Compare(a.Name, b.Name) })
	}
	out := &cexecv1.ListSkillsResponse{Skills: make([]*cexecv1.Skill, 0, len(skills))}
	for _, sk := range skills {
		out.Skills = append(out.Skills, skillProto(sk))
	}
	return out, nil
}

// GetSkill returns a skill with its instructions and code: the tenant's own
// when it has one of that name, else the shared one.
func (s *Server) GetSkill(_ context.Context, req *cexecv1.GetSkillRequest) (*cexecv1.GetSkillResponse, error) {
	t, err := s.existing(req.GetTenant())
	var sk workspace.Skill
	switch {
	case errors.Is(err, workspace.ErrNoTenant):
		sk, err = s.d.Workspaces.SharedSkill(req.GetName())
	case err == nil:
		sk, err = t.GetSkill(req.GetName())
	}
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &cexecv1.GetSkillResponse{Skill: skillProto(sk)}, nil
}

// SaveSkill checks (name, py_compile) and stores one of the tenant's
// skills; the next execution imports it as skills.<name>.
func (s *Server) SaveSkill(ctx context.Context, req *cexecv1.SaveSkillRequest) (*cexecv1.SaveSkillResponse, error) {
	t, err := s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	sk, err := t.SaveSkill(ctx, req.GetName(), req.GetDescription(), req.GetCode())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	s.d.Log.Info("skill saved", "tenant", t.ID(), "skill", sk.Name)
	return &cexecv1.SaveSkillResponse{Skill: skillProto(sk)}, nil
}

func skillProto(sk workspace.Skill) *cexecv1.Skill {
	return &cexecv1.Skill{
		Name:         sk.Name,
		Description:  sk.Description,
		Shared:       sk.Shared,
		Import:       sk.Import,
		Instructions: sk.Instructions,
		Code:         sk.Code,
		Problem:      sk.Problem,
	}
}

// ListTenants lists declared tenants and those with a workspace.
func (s *Server) ListTenants(ctx context.Context, _ *cexecv1.ListTenantsRequest) (*cexecv1.ListTenantsResponse, error) {
	if s.d.Workspaces == nil {
		return nil, status.Error(codes.Unimplemented, "workspaces are not wired into this cexecd")
	}
	infos, err := s.d.Workspaces.Tenants(ctx)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &cexecv1.ListTenantsResponse{Tenants: make([]*cexecv1.TenantInfo, 0, len(infos))}
	for _, i := range infos {
		ti := &cexecv1.TenantInfo{
			Id:        i.ID,
			Declared:  i.Declared,
			DiskBytes: i.DiskBytes,
			DiskQuota: i.Quota.DiskBytes,
			MaxFiles:  i.Quota.MaxFiles,
			DiskMode:  i.DiskMode,
			Running:   int32(i.Running),
			Sessions:  int32(i.Sessions),
		}
		// A declared tenant that never ran has no times.
		if !i.LastUsed.IsZero() {
			ti.LastUsedUnixMs = i.LastUsed.UnixMilli()
		}
		if !i.Created.IsZero() {
			ti.CreatedUnixMs = i.Created.UnixMilli()
		}
		out.Tenants = append(out.Tenants, ti)
	}
	return out, nil
}

// GCTenants removes (or, in a dry run, lists) undeclared tenants without a
// running execution that were unused for longer than older_than_ms.
func (s *Server) GCTenants(ctx context.Context, req *cexecv1.GCTenantsRequest) (*cexecv1.GCTenantsResponse, error) {
	if s.d.Workspaces == nil {
		return nil, status.Error(codes.Unimplemented, "workspaces are not wired into this cexecd")
	}
	age := time.Duration(req.GetOlderThanMs()) * time.Millisecond
	removed, err := s.d.Workspaces.GC(ctx, age, req.GetDryRun())
	out := &cexecv1.GCTenantsResponse{Removed: make([]*cexecv1.TenantInfo, 0, len(removed))}
	for _, e := range removed {
		out.Removed = append(out.Removed, &cexecv1.TenantInfo{Id: e.ID, DiskBytes: e.DiskBytes, LastUsedUnixMs: e.LastUsed.UnixMilli()})
	}
	if err != nil {
		// Tenants removed before the failure are gone; say which in the log,
		// since a status error carries no response.
		if len(removed) > 0 && !req.GetDryRun() {
			s.d.Log.Warn("tenant gc stopped after removing some tenants", "removed", len(removed), "error", err)
		}
		return nil, pluginapi.ToStatus(err)
	}
	if !req.GetDryRun() {
		s.d.Log.Info("tenant gc", "older_than", age, "removed", len(removed))
	}
	return out, nil
}
