package client

import (
	"context"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// PoolStatus reports the daemon's warm sandbox pool: idle sandboxes per
// tenant, busy ones, creations in flight, the limits, each active tenant's
// target and every sandbox with its resident memory. A gRPC
// FailedPrecondition status means no sandbox backend is running.
func (c *Client) PoolStatus(ctx context.Context) (*cexecv1.PoolStatusResponse, error) {
	r, err := c.rpc.PoolStatus(ctx, &cexecv1.PoolStatusRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "pool status", err)
	}
	return r, nil
}
