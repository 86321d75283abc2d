// Package plugins is `cexecctl plugins`: list the daemon's plugins and ping
// one through the daemon.
package plugins

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the plugins command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "plugins",
		Short: "Inspect the plugins cexecd runs",
	})
	cmd.AddCommand(ls(env), ping(env))
	return cmd
}

func ls(env *cli.Env) *cobra.Command {
	return cli.List(env, "List configured plugins: KIND NAME VERSION API STATUS RESTARTS", func(ctx context.Context, c *client.Client) error {
		ps, err := c.ListPlugins(ctx)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListPluginsResponse{Plugins: ps})
		}
		return table(env, ps)
	})
}

func table(env *cli.Env, ps []*cexecv1.PluginStatus) error {
	t := cli.NewTable(env.Stdout, "KIND", "NAME", "VERSION", "API", "STATUS", "RESTARTS")
	for _, p := range ps {
		t.Row(p.GetKind(), p.GetName(), cli.Dash(p.GetVersion()), cli.Dash(p.GetApiVersion()), p.GetStatus(), p.GetRestarts())
	}
	if err := t.Flush(); err != nil {
		return err
	}
	// Errors are too long for a column; show them under the table for the
	// plugins they explain, and for restarted ones how they last ended.
	for _, p := range ps {
		if p.GetLastError() != "" && (p.GetStatus() != "ok" || p.GetRestarts() > 0) {
			fmt.Fprintf(env.Stdout, "%s %s: %s\n", p.GetKind(), p.GetName(), p.GetLastError())
		}
	}
	return nil
}

func ping(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "ping KIND NAME",
		Short: "Call a plugin through the daemon to check that it answers",
		Args:  cli.Args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.PingPlugin(cmd.Context(), args[0], args[1])
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(r)
				}
				fmt.Fprintf(env.Stdout, "%s %s: ok (version %s, api %v) in %s\n", r.GetKind(), r.GetName(), cli.Dash(r.GetVersion()), r.GetApiVersions(), time.Duration(r.GetLatencyUs())*time.Microsecond)
				return nil
			})
		},
	}
}
