// Package config is `cexecctl config`: check a config file and show the
// daemon's effective config with secrets masked.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/plural"
)

// Command returns the config command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "config",
		Short: "Check or show cexecd's configuration",
	})
	cmd.AddCommand(check(env), show(env))
	return cmd
}

func check(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "check [FILE]",
		Short: "Check a config file (default: the daemon's own); exits 1 when it has errors",
		Long: "Check loads FILE in the running daemon and prints every diagnostic as file:line:col.\n" +
			"Without a daemon, use `cexecd validate -config FILE`.",
		Args: cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var path string
			if len(args) == 1 {
				// The daemon runs elsewhere; a relative path means the
				// caller's working directory.
				abs, err := filepath.Abs(args[0])
				if err != nil {
					return fmt.Errorf("resolve %s: %w", args[0], err)
				}
				path = abs
			}
			err := env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.CheckConfig(cmd.Context(), path)
				if err != nil {
					return err
				}
				errs, warns := 0, 0
				for _, d := range r.GetDiagnostics() {
					if d.GetSeverity() == "warning" {
						warns++
					} else {
						errs++
					}
				}
				if env.JSON {
					if err := env.PrintProto(r); err != nil {
						return err
					}
				} else {
					for _, d := range r.GetDiagnostics() {
						fmt.Fprintln(env.Stdout, cli.FormatDiagnostic(d))
					}
					if errs == 0 {
						fmt.Fprintf(env.Stdout, "%s: configuration is valid (%s)\n", r.GetPath(), plural.Count(warns, "warning"))
					}
				}
				if errs > 0 {
					return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%s: %s, %s", r.GetPath(), plural.Count(errs, "error"), plural.Count(warns, "warning"))}
				}
				return nil
			})
			if nr := (*client.NotRunningError)(nil); errors.As(err, &nr) {
				return fmt.Errorf("%w; or check the file without a daemon: cexecd validate -config FILE", err)
			}
			return err
		},
	}
}

// Shown is the JSON output of `cexecctl config show --json`.
type Shown struct {
	Path   string          `json:"path"`
	Config json.RawMessage `json:"config"`
}

func show(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the daemon's effective config as JSON, secrets masked",
		Args:  cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.ShowConfig(cmd.Context())
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintJSON(Shown{Path: r.GetPath(), Config: r.GetConfigJson()})
				}
				var out bytes.Buffer
				if err := json.Indent(&out, r.GetConfigJson(), "", "  "); err != nil {
					return fmt.Errorf("daemon sent invalid config json: %w", err)
				}
				out.WriteByte('\n')
				_, err = env.Stdout.Write(out.Bytes())
				return err
			})
		},
	}
}
