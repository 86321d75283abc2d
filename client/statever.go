package client

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// ErrStateConflict is SaveStateIf finding the state at another version: it
// was saved since it was read, and nothing was written. Load it again and
// retry.
var ErrStateConflict = errors.New("state changed since it was read")

// LoadState returns a state's value as JSON and the version to pass to
// SaveStateIf.
func (c *Client) LoadState(ctx context.Context, tenant, name string) (json.RawMessage, string, error) {
	r, err := cexecv1.NewStateVersionsClient(c.conn).LoadState(ctx, &cexecv1.LoadStateRequest{Tenant: tenant, Name: name})
	if err != nil {
		return nil, "", c.wrap(ctx, "load state "+name, err)
	}
	return r.GetValue(), r.GetVersion(), nil
}

// SaveStateIf stores a JSON value while the stored state is still at
// version ("" : does not exist), with SaveState's guarantees; otherwise
// its error wraps ErrStateConflict. It returns the saved value's version.
func (c *Client) SaveStateIf(ctx context.Context, tenant, name string, value json.RawMessage, version string) (*cexecv1.SaveStateIfResponse, error) {
	r, err := cexecv1.NewStateVersionsClient(c.conn).SaveStateIf(ctx, &cexecv1.SaveStateIfRequest{Tenant: tenant, Name: name, Value: value, Version: version})
	if status.Code(err) == codes.Aborted {
		return nil, errors.Join(ErrStateConflict, c.wrap(ctx, "save state "+name, err))
	}
	if err != nil {
		return nil, c.wrap(ctx, "save state "+name, err)
	}
	return r, nil
}
