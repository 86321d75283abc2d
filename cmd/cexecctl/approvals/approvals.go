// Package approvals is `cexecctl approvals`: the tool calls that wait for
// an operator's approval, and the operator's decision on each.
package approvals

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the approvals command.
func Command(env *cli.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide tool calls waiting for approval",
		Long: `List and decide tool calls waiting for approval.

A tenant policy's approval block makes calls to some tools wait for a
person's yes. cexecd asks the agent's user through MCP elicitation; when the
agent's client cannot be asked, the call waits here, for an operator, until
the rule's timeout, and is refused if nobody approves it. Arguments are
shown with PII as tokens.`,
		Args: cli.Args(cobra.NoArgs),
	}
	cmd.AddCommand(lsCommand(env), decideCommand(env, "approve", true), decideCommand(env, "deny", false))
	return cmd
}

func lsCommand(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the tool calls waiting for approval, oldest first",
		Args:  cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				as, err := c.ListApprovals(cmd.Context())
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(&cexecv1.ListApprovalsResponse{Approvals: as})
				}
				return render(env.Stdout, as, time.Now())
			})
		},
	}
}

func decideCommand(env *cli.Env, verb string, approve bool) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: map[bool]string{true: "Approve a waiting tool call: it runs", false: "Deny a waiting tool call: the program gets a PermissionError"}[approve],
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				if err := c.DecideApproval(cmd.Context(), args[0], approve); err != nil {
					return err
				}
				past := map[bool]string{true: "approved", false: "denied"}[approve]
				_, err := fmt.Fprintf(env.Stdout, "%s %s\n", past, args[0])
				return err
			})
		},
	}
}

func render(w io.Writer, as []*cexecv1.PendingApproval, now time.Time) error {
	if len(as) == 0 {
		_, err := fmt.Fprintln(w, "no tool calls are waiting for approval")
		return err
	}
	t := cli.NewTable(w, "ID", "TENANT", "SESSION", "TOOL", "WAITING", "TIMES OUT IN", "ARGUMENTS")
	for _, a := range as {
		left := "-"
		if a.GetDeadline() != nil {
			left = a.GetDeadline().AsTime().Sub(now).Round(time.Second).String()
		}
		t.Row(a.GetId(), a.GetTenant(), a.GetSession(), a.GetServer()+"/"+a.GetTool(),
			now.Sub(a.GetCreated().AsTime()).Round(time.Second).String(), left, a.GetArgumentsJson())
	}
	return t.Flush()
}
