package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// NewRoot returns the root command of a cexecctl binary: the global flags,
// usage errors that exit with ExitUsage, and errors left to Main to print.
func NewRoot(env *Env, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "cexecctl",
		Short:         short,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cmd.SetOut(env.Stdout)
	cmd.SetErr(env.Stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	env.AddGlobalFlags(cmd)
	return cmd
}

// Main runs the command tree root builds until SIGINT or SIGTERM, prints
// its error and exits with its code.
func Main(root func(*Env) *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &Env{Stdout: os.Stdout, Stderr: os.Stderr}
	err := root(env).ExecuteContext(ctx)
	stop()
	var ee *ExitError
	if err != nil && !(errors.As(err, &ee) && ee.Err == nil) {
		fmt.Fprintf(os.Stderr, "cexecctl: %s\n", Message(err))
	}
	os.Exit(ExitCode(err))
}

// FindBinary returns the path of the program name: the one beside the
// running binary, so that bin/cexecctl uses bin/cexecd and not whatever is
// installed, else the one in PATH.
func FindBinary(name string) (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return exec.LookPath(name)
}
