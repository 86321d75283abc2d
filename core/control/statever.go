package control

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
)

// stateVersions is the StateVersions service over the Control server's
// workspaces.
type stateVersions struct {
	cexecv1.UnimplementedStateVersionsServer
	s *Server
}

// LoadState returns a state's value as JSON and its version.
func (v stateVersions) LoadState(_ context.Context, req *cexecv1.LoadStateRequest) (*cexecv1.LoadStateResponse, error) {
	t, err := v.s.existing(req.GetTenant())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	value, version, err := t.LoadState(req.GetName())
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &cexecv1.LoadStateResponse{Value: value, Version: version}, nil
}

// SaveStateIf saves a JSON value while the stored state is at the given
// version; a conflict answers codes.Aborted.
func (v stateVersions) SaveStateIf(_ context.Context, req *cexecv1.SaveStateIfRequest) (*cexecv1.SaveStateIfResponse, error) {
	t, err := v.s.tenant(req.GetTenant())
	if err != nil {
		return nil, err
	}
	info, err := t.SaveStateIf(req.GetName(), req.GetValue(), req.GetVersion())
	if errors.Is(err, workspace.ErrStateConflict) {
		return nil, status.Error(codes.Aborted, err.Error())
	}
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	v.s.d.Log.Debug("state saved", "tenant", t.ID(), "name", info.Name, "bytes", info.Size, "version", info.Version)
	return &cexecv1.SaveStateIfResponse{Name: info.Name, Bytes: info.Size, Version: info.Version}, nil
}
