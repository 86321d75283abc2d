// Package servers is `cexecctl servers`: the upstream MCP servers cexecd is
// connected to, and the packages of local tools.
package servers

import (
	"context"
	"fmt"
	"time"

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
		switch {
		case s.GetScope() == "tenant":
			pid = fmt.Sprintf("per tenant (%d)", len(s.GetInstances()))
		case s.GetPid() > 0:
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
		if s.GetStrayStdoutLines() > 0 {
			fmt.Fprintf(env.Stdout, "%s: %s\n", s.GetName(), strays(s.GetStrayStdoutLines(), s.GetLastStrayStdoutLine()))
		}
	}
	return instances(env, ss, time.Now())
}

// instances lists the running per-tenant instances of tenant-scoped
// servers; a server with none starts one on its next call.
func instances(env *cli.Env, ss []*cexecv1.ServerInfo, now time.Time) error {
	var t *cli.Table
	for _, s := range ss {
		for _, in := range s.GetInstances() {
			if t == nil {
				fmt.Fprintln(env.Stdout)
				t = cli.NewTable(env.Stdout, "SERVER", "TENANT", "STATE", "PID", "UP", "IDLE", "CALLS", "RESTARTS")
			}
			pid := "-"
			if in.GetPid() > 0 {
				pid = fmt.Sprint(in.GetPid())
			}
			idle := "busy"
			if in.GetInFlight() == 0 {
				idle = since(now, in.GetLastUsedUnixMs())
			}
			t.Row(s.GetName(), in.GetTenant(), in.GetState(), pid, since(now, in.GetStartedUnixMs()), idle, in.GetInFlight(), in.GetRestarts())
		}
	}
	if t == nil {
		return nil
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, s := range ss {
		for _, in := range s.GetInstances() {
			if in.GetLastError() != "" && in.GetState() != "ok" {
				fmt.Fprintf(env.Stdout, "%s (tenant %s): %s\n", s.GetName(), in.GetTenant(), in.GetLastError())
			}
			if in.GetStrayStdoutLines() > 0 {
				fmt.Fprintf(env.Stdout, "%s (tenant %s): %s\n", s.GetName(), in.GetTenant(), strays(in.GetStrayStdoutLines(), in.GetLastStrayStdoutLine()))
			}
		}
	}
	return nil
}

// strays says that a server wrote lines on stdout that the client skips:
// an answer written that way is lost and its call times out.
func strays(n int32, last string) string {
	lines := "1 line that is"
	if n > 1 {
		lines = fmt.Sprintf("%d lines that are", n)
	}
	return fmt.Sprintf("wrote %s not JSON-RPC on stdout, which cexecd skips (a stdio server must log to stderr); the last: %s", lines, last)
}

func since(now time.Time, unixMs int64) string {
	if unixMs == 0 {
		return "-"
	}
	return now.Sub(time.UnixMilli(unixMs)).Round(time.Second).String()
}
