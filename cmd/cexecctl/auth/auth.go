// Package auth is `cexecctl auth`: sign tenants in to OAuth-protected
// upstream MCP servers, list the sign-ins cexecd keeps, sign out.
package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the auth command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "auth",
		Short: "Sign in to OAuth-protected upstream MCP servers",
	})
	cmd.AddCommand(login(env), ls(env), logout(env))
	return cmd
}

func login(env *cli.Env) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "login SERVER [--tenant T]",
		Short: "Sign a tenant in to SERVER: prints the URL to open and waits for the sign-in",
		Long: `Sign a tenant in to an upstream MCP server that has an oauth block. cexecd
discovers the server's authorization server, prints the URL to open in a
browser and waits (up to 10 minutes) for the authorization server to redirect
back to cexecd's loopback listener (redirect_port, or any free port). The
token stays in cexecd, encrypted under data_dir/auth; it is refreshed as it
expires. A shared server has one sign-in (the default tenant's); a server with
scope = "tenant" has one per tenant. A client_credentials server signs in
without a browser.`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cli.TenantChosen(cmd) {
				tenant = ""
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				done, err := c.Login(cmd.Context(), args[0], tenant, func(u string) {
					if env.JSON {
						_ = env.PrintJSON(map[string]string{"authorization_url": u})
						return
					}
					fmt.Fprintf(env.Stdout, "Open this URL to sign in to %s:\n\n  %s\n\nWaiting for the sign-in to finish...\n", args[0], u)
				})
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(done)
				}
				fmt.Fprintf(env.Stdout, "Signed in to %s for tenant %s.\n", done.GetServer(), done.GetTenant())
				return nil
			})
		},
	}
	cli.TenantFlag(cmd.Flags(), &tenant)
	return cmd
}

func ls(env *cli.Env) *cobra.Command {
	return cli.List(env, "List sign-ins: SERVER TENANT ISSUER SCOPE EXPIRES REFRESH UPDATED", func(ctx context.Context, c *client.Client) error {
		ls, err := c.ListLogins(ctx)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListLoginsResponse{Logins: ls})
		}
		t := cli.NewTable(env.Stdout, "SERVER", "TENANT", "ISSUER", "SCOPE", "EXPIRES", "REFRESH", "UPDATED")
		for _, l := range ls {
			exp := "-"
			if l.GetExpires() != nil {
				exp = l.GetExpires().AsTime().Local().Format(time.DateTime)
			}
			t.Row(l.GetServer(), l.GetTenant(), cli.Dash(l.GetIssuer()), cli.Dash(l.GetScope()), exp, cli.YesNo(l.GetRefreshable()),
				l.GetUpdated().AsTime().Local().Format(time.DateTime))
		}
		return t.Flush()
	})
}

func logout(env *cli.Env) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "logout SERVER [--tenant T]",
		Short: "Forget a tenant's token for SERVER",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cli.TenantChosen(cmd) {
				tenant = ""
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				if err := c.Logout(cmd.Context(), args[0], tenant); err != nil {
					return err
				}
				if !env.JSON {
					fmt.Fprintf(env.Stdout, "Signed out of %s.\n", args[0])
				}
				return nil
			})
		},
	}
	cli.TenantFlag(cmd.Flags(), &tenant)
	return cmd
}
