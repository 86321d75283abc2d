// Package status is `cexecctl status`: the daemon's version, uptime, config
// file and a summary of its plugins.
package status

import (
	"fmt"
	"text/tabwriter"
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
		Short: "Show the daemon's version, uptime, config file and plugin summary",
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
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%s\n", r.GetVersion())
	fmt.Fprintf(tw, "pid\t%d\n", r.GetPid())
	fmt.Fprintf(tw, "uptime\t%s\n", (time.Duration(r.GetUptimeMs()) * time.Millisecond).Round(time.Second))
	fmt.Fprintf(tw, "config\t%s\n", cfg)
	fmt.Fprintf(tw, "socket\t%s\n", r.GetSocket())
	fmt.Fprintf(tw, "plugins\t%d configured: %d ok, %d restarting, %d failed\n", p.GetTotal(), p.GetOk(), p.GetRestarting(), p.GetFailed())
	return tw.Flush()
}
