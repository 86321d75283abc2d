// Command cexecctl-bench is `cexecctl bench`, which cexecctl runs in its
// place: a binary of its own so that the benchmarks' dependencies do not
// slow every other cexecctl command's start.
package main

import (
	"github.com/spf13/cobra"

	"github.com/cexec/cexec/cmd/cexecctl/bench"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

func main() { cli.Main(root) }

func root(env *cli.Env) *cobra.Command {
	cmd := cli.NewRoot(env, "Measure a running cexecd")
	cmd.AddCommand(bench.Command(env))
	return cmd
}
