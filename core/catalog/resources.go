package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/telemetry"
)

// readResource reads uri from the upstream server for tenant (resources/read),
// routed, bounded and failing as Call is: a tenant-scoped server's read goes
// to tenant's own instance, and errors wrap ErrUnknownServer, ErrUnavailable,
// ErrConnectionLost or ErrTimeout, or carry the server's JSON-RPC error.
func (c *Catalog) readResource(ctx context.Context, tenant, server, uri string) (*mcp.ReadResourceResult, error) {
	what := fmt.Sprintf("read %s from %s", uri, server)
	u := c.set().byName[server]
	if u == nil {
		return nil, fmt.Errorf("%s: %w", what, ErrUnknownServer)
	}
	if u.tenants != nil {
		in, release, err := u.tenants.acquire(tenant)
		if err != nil {
			return nil, fmt.Errorf("%s for tenant %s: %w", what, tenant, err)
		}
		defer release()
		u = in.up
	}
	timeout := callTimeout(u.cfg)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cn, err := u.ready(cctx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: %w after %s: %w", what, ErrTimeout, timeout, err)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	res, err := cn.client.ReadResource(cctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri, Meta: telemetry.InjectMeta(ctx, nil)}})
	if err == nil {
		return res, nil
	}
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", what, ctx.Err())
	case cctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w after %s", what, ErrTimeout, timeout)
	case cn.isDead() || errors.Is(err, transport.ErrTransportClosed):
		cn.markDead(err)
		return nil, fmt.Errorf("%s: %w (server %s went away during the read and is being restarted): %v", what, ErrConnectionLost, server, deathCause(cn, err))
	case isConnError(err):
		cn.markDead(err)
		return nil, fmt.Errorf("%s: %w (reconnecting to %s): %v", what, ErrConnectionLost, server, err)
	}
	return nil, fmt.Errorf("%s: %w", what, err)
}
