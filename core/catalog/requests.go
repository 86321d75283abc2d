package catalog

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// GetPrompt gets a prompt of an upstream server for tenant (prompts/get).
func (c *Catalog) GetPrompt(ctx context.Context, tenant, server, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	var out *mcp.GetPromptResult
	err := c.request(ctx, tenant, server, "prompts/get "+name, func(ctx context.Context, cn *conn) (err error) {
		out, err = cn.client.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: name, Arguments: args}})
		return err
	})
	return out, err
}

// request makes one request of an upstream server the way Call does: the
// tenant's instance of a tenant-scoped server, the server's timeout, a
// dead connection marked for reconnection.
func (c *Catalog) request(ctx context.Context, tenant, server, what string, do func(context.Context, *conn) error) error {
	u := c.set().byName[server]
	if u == nil {
		return fmt.Errorf("%s on %s: %w", what, server, ErrUnknownServer)
	}
	if u.tenants != nil {
		in, release, err := u.tenants.acquire(tenant)
		if err != nil {
			return fmt.Errorf("%s on %s for tenant %s: %w", what, server, tenant, err)
		}
		defer release()
		u = in.up
	}
	timeout := callTimeout(u.cfg)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cn, err := u.ready(cctx)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", what, server, err)
	}
	err = do(cctx, cn)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%s on %s: %w", what, server, ctx.Err())
	case cctx.Err() != nil:
		return fmt.Errorf("%s on %s: %w after %s", what, server, ErrTimeout, timeout)
	case cn.isDead() || isConnError(err):
		cn.markDead(err)
		return fmt.Errorf("%s on %s: %w: %v", what, server, ErrConnectionLost, err)
	}
	return fmt.Errorf("%s on %s: %w", what, server, err)
}
