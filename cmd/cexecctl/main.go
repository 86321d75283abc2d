// Command cexecctl is the command-line client of cexecd. Every command takes
// --address (or $CEXECD_ADDRESS, else $CEXEC_SOCKET) and --json. Exit codes:
// 0 ok, 1 failure, 2 usage error, 3 daemon not running.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/cmd/cexecctl/approvals"
	"github.com/cexec/cexec/cmd/cexecctl/audit"
	"github.com/cexec/cexec/cmd/cexecctl/auth"
	"github.com/cexec/cexec/cmd/cexecctl/bench"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/cmd/cexecctl/config"
	"github.com/cexec/cexec/cmd/cexecctl/doctor"
	"github.com/cexec/cexec/cmd/cexecctl/exec"
	"github.com/cexec/cexec/cmd/cexecctl/mcp"
	"github.com/cexec/cexec/cmd/cexecctl/plugins"
	"github.com/cexec/cexec/cmd/cexecctl/pool"
	"github.com/cexec/cexec/cmd/cexecctl/servers"
	"github.com/cexec/cexec/cmd/cexecctl/sessions"
	"github.com/cexec/cexec/cmd/cexecctl/skills"
	"github.com/cexec/cexec/cmd/cexecctl/state"
	"github.com/cexec/cexec/cmd/cexecctl/status"
	"github.com/cexec/cexec/cmd/cexecctl/task"
	"github.com/cexec/cexec/cmd/cexecctl/tenants"
	"github.com/cexec/cexec/cmd/cexecctl/tools"
	"github.com/cexec/cexec/cmd/cexecctl/version"
	"github.com/cexec/cexec/cmd/cexecctl/workflow"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}
	err := root(env).ExecuteContext(ctx)
	stop()
	var ee *cli.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.Err == nil) {
		fmt.Fprintf(os.Stderr, "cexecctl: %s\n", cli.Message(err))
	}
	os.Exit(cli.ExitCode(err))
}

func root(env *cli.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "cexecctl",
		Short:         "Control a running cexecd",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cmd.SetOut(env.Stdout)
	cmd.SetErr(env.Stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &cli.ExitError{Code: cli.ExitUsage, Err: err}
	})
	env.AddGlobalFlags(cmd)
	cmd.AddCommand(
		status.Command(env),
		audit.Command(env),
		doctor.Command(env),
		plugins.Command(env),
		pool.Command(env),
		config.Command(env),
		exec.Command(env),
		version.Command(env),
		bench.Command(env),
		mcp.Command(env),
		tools.Command(env),
		servers.Command(env),
		state.Command(env),
		sessions.Command(env),
		skills.Command(env),
		tenants.Command(env),
		workflow.Command(env),
	)
	cmd.AddCommand(task.Command(env))
	cmd.AddCommand(approvals.Command(env))
	cmd.AddCommand(auth.Command(env))
	// bench task lives with the command it measures.
	if b, _, err := cmd.Find([]string{"bench"}); err == nil {
		b.AddCommand(task.BenchCommand(env))
	}
	return cmd
}
