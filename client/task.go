package client

import (
	"context"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// ExecuteTask gives the daemon a task in words: it selects tools, has the
// configured generators write a program, checks it with the guards, runs it
// and repairs it on failure. The response's status says how it ended ("ok",
// "failed", "no_code", "denied") and its diagnostics why; an error means the
// task could not be carried out at all (a gRPC FailedPrecondition status:
// no sandbox backend is running).
func (c *Client) ExecuteTask(ctx context.Context, req *cexecv1.ExecuteTaskRequest) (*cexecv1.ExecuteTaskResponse, error) {
	r, err := c.rpc.ExecuteTask(ctx, req)
	if err != nil {
		return nil, c.wrap(ctx, "execute task", err)
	}
	return r, nil
}
