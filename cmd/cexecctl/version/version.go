// Package version is `cexecctl version`: the client's version and, when a
// daemon answers, the daemon's.
package version

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	coreversion "github.com/cexec/cexec/internal/version"
)

// Versions is the JSON output of `cexecctl version --json`.
type Versions struct {
	Client string `json:"client"`
	// Daemon is empty when no daemon answers; DaemonError then says why.
	Daemon      string `json:"daemon,omitempty"`
	DaemonError string `json:"daemon_error,omitempty"`
}

// Command returns the version command. It succeeds without a daemon: the
// client version alone is still an answer.
func Command(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show the cexecctl version and, if it is running, the cexecd version",
		Args:  cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := Versions{Client: coreversion.Version}
			err := env.Do(cmd.Context(), func(c *client.Client) error {
				st, err := c.Status(cmd.Context())
				if err == nil {
					v.Daemon = st.GetVersion()
				}
				return err
			})
			if err != nil {
				v.DaemonError = err.Error()
			}
			if env.JSON {
				return env.PrintJSON(v)
			}
			fmt.Fprintf(env.Stdout, "cexecctl %s\n", v.Client)
			if v.Daemon != "" {
				fmt.Fprintf(env.Stdout, "cexecd   %s\n", v.Daemon)
			} else {
				fmt.Fprintf(env.Stderr, "cexecd: %s\n", v.DaemonError)
			}
			return nil
		},
	}
}
