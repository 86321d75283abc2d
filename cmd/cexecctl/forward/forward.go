// Package forward makes a cexecctl command that another binary implements.
// `cexecctl bench` is cexecctl-bench: the benchmarks link an MCP client,
// whose JSON Schema metaschemas and tokenizer tables every cexecctl run
// would otherwise initialise and page in before doing anything (20 of its
// 50 ms on a VM where a page fault costs 30 µs).
package forward

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the command use, which runs binary with use and the
// command line's arguments in place of cexecctl: output, exit code and
// signals are the other binary's. Help and shell completion go there too.
func Command(use, short, binary string) *cobra.Command {
	cmd := &cobra.Command{
		Use:                use + " [command]",
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return run(use, binary, args)
		},
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return complete(c.Context(), use, binary, args, toComplete)
		},
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		if err := run(use, binary, []string{"--help"}); err != nil {
			fmt.Fprintf(c.ErrOrStderr(), "cexecctl: %s\n", err)
		}
	})
	return cmd
}

// run replaces cexecctl with binary. Global flags given before use are in
// args (flag parsing is off), and the other binary takes them anywhere.
func run(use, binary string, args []string) error {
	path, err := find(use, binary)
	if err != nil {
		return err
	}
	argv := append([]string{binary, use}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("run %s: %w", path, err)
	}
	return nil
}

// complete asks binary for the completions of its command line, through
// cobra's hidden completion command, which prints one per line and then
// ":<directive>".
func complete(ctx context.Context, use, binary string, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	path, err := find(use, binary)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	argv := append(append([]string{cobra.ShellCompRequestCmd, use}, args...), toComplete)
	out, err := exec.CommandContext(ctx, path, argv...).Output()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var comps []cobra.Completion
	directive := cobra.ShellCompDirectiveDefault
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, ":"); ok {
			if n, err := strconv.Atoi(d); err == nil {
				directive = cobra.ShellCompDirective(n)
			}
			break
		}
		comps = append(comps, line)
	}
	return comps, directive
}

func find(use, binary string) (string, error) {
	path, err := cli.FindBinary(binary)
	if err != nil {
		return "", fmt.Errorf("cexecctl %s is the program %s, which is neither beside cexecctl nor in PATH (make build puts it in bin/, make install beside cexecctl): %w",
			use, binary, err)
	}
	return path, nil
}
