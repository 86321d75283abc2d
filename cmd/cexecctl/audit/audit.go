// Package audit is `cexecctl audit verify`: it checks the audit logs' hash
// chains and names the first line that was edited, inserted or removed.
package audit

import (
	"fmt"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/plural"
)

// Command returns the audit command group.
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{Use: "audit", Short: "Check the audit logs"})
	var tenant string
	var all bool
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Verify audit log hash chains (exit 1 when a line was edited, inserted or removed)",
		Args:  cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				reps, err := c.VerifyAudit(cmd.Context(), tenant, all)
				if err != nil {
					return err
				}
				if env.JSON {
					if err := env.PrintProto(&cexecv1.VerifyAuditResponse{Reports: reps}); err != nil {
						return err
					}
				} else {
					print(env, reps)
				}
				for _, r := range reps {
					if r.GetBroken() != nil || r.GetError() != "" {
						return &cli.ExitError{Code: cli.ExitFailure}
					}
				}
				return nil
			})
		},
	}
	verify.Flags().StringVar(&tenant, "tenant", "", "tenant whose log to verify (default: the default tenant)")
	verify.Flags().BoolVar(&all, "all", false, "verify every tenant's log and the daemon's own")
	cmd.AddCommand(verify)
	return cmd
}

func print(env *cli.Env, reps []*cexecv1.AuditReport) {
	for _, r := range reps {
		name := "tenant " + r.GetTenant()
		if r.GetTenant() == "" {
			name = "daemon"
		}
		switch {
		case r.GetError() != "":
			fmt.Fprintf(env.Stdout, "%s: cannot verify: %s\n", name, r.GetError())
		case r.GetBroken() != nil:
			b := r.GetBroken()
			fmt.Fprintf(env.Stdout, "%s: BROKEN at %s line %d: %s (%s verified before it)\n", name, b.GetFile(), b.GetLine(), b.GetReason(), plural.Count(r.GetLines(), "line"))
		case r.GetLines() == 0:
			fmt.Fprintf(env.Stdout, "%s: ok, empty\n", name)
		default:
			from := ""
			if r.GetFirstSeq() > 1 {
				from = fmt.Sprintf(" (from seq %d: older files rotated away)", r.GetFirstSeq())
			}
			fmt.Fprintf(env.Stdout, "%s: ok, %s, seq %d-%d in %d files%s\n", name, plural.Count(r.GetLines(), "line"), r.GetFirstSeq(), r.GetLastSeq(), len(r.GetFiles()), from)
		}
	}
}
