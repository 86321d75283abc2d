// Package skills is `cexecctl skills`: list, show and save skills, the
// reusable code sandboxed programs import as skills.<name>.
package skills

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the skills command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	var tenant string
	cmd := cli.Group(&cobra.Command{
		Use:   "skills",
		Short: "List, show and save skills (code programs import as skills.<name>)",
		Long: `A skill is a folder with SKILL.md (name, description, instructions) and
Python code. Shared skills come from the repository's skills/ folder and are
read-only; each tenant also has its own, saved here or by sandboxed code with
cexec.save_skill. A tenant's skill wins over a shared one of the same name.`,
	})
	cli.TenantFlag(cmd.PersistentFlags(), &tenant)
	cmd.AddCommand(ls(env, &tenant), show(env, &tenant), save(env, &tenant))
	return cmd
}

func ls(env *cli.Env, tenant *string) *cobra.Command {
	return cli.List(env, "List the tenant's and the shared skills: NAME SCOPE IMPORT DESCRIPTION (BROKEN: why, for a folder whose SKILL.md makes no skill)", func(ctx context.Context, c *client.Client) error {
		skills, err := c.ListSkills(ctx, *tenant)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListSkillsResponse{Skills: skills})
		}
		t := cli.NewTable(env.Stdout, "NAME", "SCOPE", "IMPORT", "DESCRIPTION")
		for _, s := range skills {
			if p := s.GetProblem(); p != "" {
				t.Row(s.GetName(), scope(s), "-", cli.FirstLine("BROKEN: "+p, 81))
				continue
			}
			t.Row(s.GetName(), scope(s), s.GetImport(), cli.FirstLine(s.GetDescription(), 81))
		}
		return t.Flush()
	})
}

func scope(s *cexecv1.Skill) string {
	if s.GetShared() {
		return "shared"
	}
	return "tenant"
}

func show(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print a skill's description, instructions and code",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				s, err := c.GetSkill(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(&cexecv1.GetSkillResponse{Skill: s})
				}
				w := env.Stdout
				fmt.Fprintf(w, "%s (%s): %s\nimport: from %s import ...\n", s.GetName(), scope(s), s.GetDescription(), s.GetImport())
				if in := strings.TrimSpace(s.GetInstructions()); in != "" {
					fmt.Fprintf(w, "\n%s\n", in)
				}
				fmt.Fprintf(w, "\n--- code ---\n%s", s.GetCode())
				if !strings.HasSuffix(s.GetCode(), "\n") {
					fmt.Fprintln(w)
				}
				return nil
			})
		},
	}
}

func save(env *cli.Env, tenant *string) *cobra.Command {
	var description string
	cmd := &cobra.Command{
		Use:   "save NAME --description TEXT [FILE | -]",
		Short: "Save Python code as one of the tenant's skills, importable as skills.NAME",
		Long: `Save Python code from FILE (or standard input) as one of the tenant's skills.
NAME must be a lowercase Python identifier that no shared skill uses. The code
must compile (it is checked with py_compile, never run); SKILL.md is written
with usage instructions listing its public functions. The next execution
imports it with: from skills.NAME import ...`,
		Args: cli.Args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(description) == "" {
				return cli.UsageErrorf("--description is required: say what the skill does")
			}
			var code []byte
			var err error
			if len(args) == 2 && args[1] != "-" {
				code, err = os.ReadFile(args[1])
			} else {
				code, err = io.ReadAll(cmd.InOrStdin())
			}
			if err != nil {
				return fmt.Errorf("read skill code: %w", err)
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				s, err := c.SaveSkill(cmd.Context(), *tenant, args[0], description, string(code))
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(&cexecv1.SaveSkillResponse{Skill: s})
				}
				_, err = fmt.Fprintf(env.Stdout, "saved skill %s for tenant %s; import it with: from %s import ...\n", s.GetName(), *tenant, s.GetImport())
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&description, "description", "d", "", "what the skill does (required)")
	return cmd
}
