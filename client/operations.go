package client

import (
	"context"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// VerifyAudit checks audit logs' hash chains: tenant's ("" the default
// tenant's), or with all every tenant's and the daemon's own.
func (c *Client) VerifyAudit(ctx context.Context, tenant string, all bool) ([]*cexecv1.AuditReport, error) {
	r, err := cexecv1.NewOperationsClient(c.conn).VerifyAudit(ctx, &cexecv1.VerifyAuditRequest{Tenant: tenant, All: all})
	if err != nil {
		return nil, c.wrap(ctx, "verify audit", err)
	}
	return r.GetReports(), nil
}

// Doctor runs the daemon's checks of its machine and config.
func (c *Client) Doctor(ctx context.Context) (*cexecv1.DoctorResponse, error) {
	r, err := cexecv1.NewOperationsClient(c.conn).Doctor(ctx, &cexecv1.DoctorRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "doctor", err)
	}
	return r, nil
}
