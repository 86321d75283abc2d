// Package status is `cexecctl status`: the daemon's version, uptime, config
// file, a summary of its plugins and where its MCP face serves.
package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the status command.
func Command(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's version, uptime, config file, plugin summary and MCP face",
		Args:  cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.Status(cmd.Context())
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(r)
				}
				return print(env, r)
			})
		},
	}
}

func print(env *cli.Env, r *cexecv1.StatusResponse) error {
	cfg := r.GetConfigFile()
	if cfg == "" {
		cfg = "(built-in defaults)"
	}
	p := r.GetPlugins()
	t := cli.NewTable(env.Stdout)
	t.Row("version", r.GetVersion())
	t.Row("pid", r.GetPid())
	t.Row("uptime", (time.Duration(r.GetUptimeMs()) * time.Millisecond).Round(time.Second))
	t.Row("config", cfg)
	t.Row("socket", r.GetSocket())
	t.Row("plugins", fmt.Sprintf("%d configured: %d ok, %d restarting, %d failed", p.GetTotal(), p.GetOk(), p.GetRestarting(), p.GetFailed()))
	t.Row("mcp", mcpState(r.GetMcp()))
	return t.Flush()
}

// mcpState is where the MCP face serves, or why its socket is off.
func mcpState(m *cexecv1.McpStatus) string {
	if m == nil {
		return "(not reported by this cexecd)"
	}
	var on []string
	if m.GetSocket() != "" {
		on = append(on, "socket "+m.GetSocket())
	}
	if m.GetListen() != "" {
		on = append(on, "tcp "+m.GetListen())
	}
	off := m.GetSocketOff()
	switch {
	case len(on) == 0 && off != "":
		return "off: " + off
	case len(on) == 0:
		return "off"
	case off != "":
		return "serving on " + strings.Join(on, " and ") + "; socket off: " + off
	}
	return "serving on " + strings.Join(on, " and ")
}
