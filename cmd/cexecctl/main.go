// Command cexecctl is the command-line client of cexecd. Every command takes
// --address (or $CEXECD_ADDRESS, else $CEXEC_SOCKET) and --json. Exit codes:
// 0 ok, 1 failure, 2 usage error, 3 daemon not running.
package main

import (
	"github.com/spf13/cobra"

	"github.com/cexec/cexec/cmd/cexecctl/approvals"
	"github.com/cexec/cexec/cmd/cexecctl/audit"
	"github.com/cexec/cexec/cmd/cexecctl/auth"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/cmd/cexecctl/config"
	"github.com/cexec/cexec/cmd/cexecctl/doctor"
	"github.com/cexec/cexec/cmd/cexecctl/exec"
	"github.com/cexec/cexec/cmd/cexecctl/forward"
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

func main() { cli.Main(root) }

func root(env *cli.Env) *cobra.Command {
	cmd := cli.NewRoot(env, "Control a running cexecd")
	cmd.AddCommand(
		status.Command(env),
		audit.Command(env),
		doctor.Command(env),
		plugins.Command(env),
		pool.Command(env),
		config.Command(env),
		exec.Command(env),
		version.Command(env),
		forward.Command("bench", "Measure cexecd (runs cexecctl-bench)", "cexecctl-bench"),
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
	return cmd
}
