package client

import (
	"context"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// ListApprovals returns the tool calls waiting for an operator's approval.
func (c *Client) ListApprovals(ctx context.Context) ([]*cexecv1.PendingApproval, error) {
	r, err := cexecv1.NewApprovalsClient(c.conn).ListApprovals(ctx, &cexecv1.ListApprovalsRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "list approvals", err)
	}
	return r.GetApprovals(), nil
}

// DecideApproval approves (approve) or denies a pending call by its id.
func (c *Client) DecideApproval(ctx context.Context, id string, approve bool) error {
	if _, err := cexecv1.NewApprovalsClient(c.conn).DecideApproval(ctx, &cexecv1.DecideApprovalRequest{Id: id, Approve: approve}); err != nil {
		return c.wrap(ctx, "decide approval", err)
	}
	return nil
}
