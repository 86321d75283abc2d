package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/telemetry"
)

// GetPrompt gets a prompt of an upstream server for tenant (prompts/get).
func (c *Catalog) GetPrompt(ctx context.Context, tenant, server, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	var out *mcp.GetPromptResult
	err := c.request(ctx, tenant, server, fmt.Sprintf("prompts/get %s on %s", name, server), func(ctx context.Context, cn *conn) (err error) {
		out, err = cn.client.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: name, Arguments: args}})
		return err
	})
	c.mask.Load().prompt(out)
	return out, c.mask.Load().err(err)
}

// readResource reads uri from the upstream server for tenant (resources/read).
func (c *Catalog) readResource(ctx context.Context, tenant, server, uri string) (*mcp.ReadResourceResult, error) {
	var out *mcp.ReadResourceResult
	err := c.request(ctx, tenant, server, fmt.Sprintf("read %s from %s", uri, server), func(cctx context.Context, cn *conn) (err error) {
		out, err = cn.client.ReadResource(cctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri, Meta: telemetry.InjectMeta(ctx, nil)}})
		return err
	})
	c.mask.Load().resource(out)
	return out, err
}

// request makes one request (what names it in errors) of an upstream server
// the way Call does: a tenant-scoped server's request goes to tenant's own
// instance, it is bounded by the server's timeout, a dead connection is
// marked for reconnection, and errors wrap ErrUnknownServer,
// ErrUnavailable, ErrConnectionLost or ErrTimeout, or carry the server's
// JSON-RPC error.
func (c *Catalog) request(ctx context.Context, tenant, server, what string, do func(context.Context, *conn) error) (err error) {
	u := c.set().byName[server]
	if u == nil {
		return fmt.Errorf("%s: %w", what, ErrUnknownServer)
	}
	top := u
	defer func() { err = u.redact(err) }() // u: the tenant's instance, once acquired
	if u.tenants != nil {
		in, release, err := u.tenants.acquire(tenant)
		if err != nil {
			return fmt.Errorf("%s for tenant %s: %w", what, tenant, err)
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
			return fmt.Errorf("%s: %w after %s: %w", what, ErrTimeout, timeout, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	strays := u.strays.begin(tenant, timeout)
	defer strays.end()
	err = do(cctx, cn)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case cctx.Err() != nil:
		u.probe(cn)
		return fmt.Errorf("%s: %w after %s%s", what, ErrTimeout, timeout, strays.since())
	case cn.isDead() || errors.Is(err, transport.ErrTransportClosed):
		cn.markDead(err)
		switch now := c.set().byName[server]; {
		case now == nil:
			return fmt.Errorf("%s: %w (server %s was removed by a config reload during the request)", what, ErrConnectionLost, server)
		case now != top:
			return fmt.Errorf("%s: %w (server %s was changed by a config reload during the request and restarts with its new settings)", what, ErrConnectionLost, server)
		}
		return fmt.Errorf("%s: %w (server %s went away during the request and is being restarted): %v", what, ErrConnectionLost, server, deathCause(cn, err))
	case isConnError(err):
		cn.markDead(err)
		return fmt.Errorf("%s: %w (reconnecting to %s): %v", what, ErrConnectionLost, server, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
