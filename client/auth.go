package client

import (
	"context"
	"errors"
	"io"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// Login signs tenant ("" for the default) in to an OAuth-protected
// upstream server. showURL gets the authorization URL to open (not called
// for a machine-to-machine server); Login returns once cexecd received the
// redirect and keeps the token, which never leaves the daemon.
func (c *Client) Login(ctx context.Context, server, tenant string, showURL func(string)) (*cexecv1.LoginDone, error) {
	stream, err := cexecv1.NewAuthClient(c.conn).Login(ctx, &cexecv1.LoginRequest{Server: server, Tenant: tenant})
	if err != nil {
		return nil, c.wrap(ctx, "auth login", err)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("auth login: cexecd ended the sign-in without a result")
		}
		if err != nil {
			return nil, c.wrap(ctx, "auth login", err)
		}
		if u := ev.GetAuthorizationUrl(); u != "" {
			showURL(u)
		}
		if d := ev.GetDone(); d != nil {
			return d, nil
		}
	}
}

// ListLogins lists the kept sign-ins (never their tokens).
func (c *Client) ListLogins(ctx context.Context) ([]*cexecv1.LoginInfo, error) {
	r, err := cexecv1.NewAuthClient(c.conn).ListLogins(ctx, &cexecv1.ListLoginsRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "auth ls", err)
	}
	return r.GetLogins(), nil
}

// Logout forgets tenant's token for server.
func (c *Client) Logout(ctx context.Context, server, tenant string) error {
	if _, err := cexecv1.NewAuthClient(c.conn).Logout(ctx, &cexecv1.LogoutRequest{Server: server, Tenant: tenant}); err != nil {
		return c.wrap(ctx, "auth logout", err)
	}
	return nil
}
