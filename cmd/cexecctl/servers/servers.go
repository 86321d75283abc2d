// Package servers is `cexecctl servers`: the upstream MCP servers cexecd is
// connected to, and the packages of local tools.
package servers

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the servers command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "servers",
		Short: "Inspect the upstream MCP servers",
	})
	cmd.AddCommand(Ls(env))
	return cmd
}

// Ls is `servers ls` (also `tools servers`).
func Ls(env *cli.Env) *cobra.Command {
	return cli.List(env, "List servers: NAME TRANSPORT STATE TOOLS PID RESTARTS PROTOCOL", func(ctx context.Context, c *client.Client) error {
		ss, err := c.ListServers(ctx)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListServersResponse{Servers: ss})
		}
		return table(env, ss)
	})
}

func table(env *cli.Env, ss []*cexecv1.ServerInfo) error {
	if len(ss) == 0 {
		fmt.Fprintln(env.Stdout, "no servers: add mcp_server blocks to cexec.hcl, or Python packages under servers_dir")
		return nil
	}
	t := cli.NewTable(env.Stdout, "NAME", "TRANSPORT", "STATE", "TOOLS", "PID", "RESTARTS", "PROTOCOL")
	for _, s := range ss {
		pid := "-"
		if s.GetPid() > 0 {
			pid = fmt.Sprint(s.GetPid())
		}
		state := s.GetState()
		if s.GetOptional() {
			state += " (optional)"
		}
		t.Row(s.GetName(), s.GetTransport(), state, s.GetTools(), pid, s.GetRestarts(), cli.Dash(s.GetProtocolVersion()))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	// Errors are too long for a column: show them under the table for the
	// servers they explain.
	for _, s := range ss {
		if s.GetLastError() != "" && s.GetState() != "ok" {
			fmt.Fprintf(env.Stdout, "%s: %s\n", s.GetName(), s.GetLastError())
		}
	}
	return nil
}
