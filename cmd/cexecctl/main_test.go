package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cexec/cexec/cmd/cexecctl/bench"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// placeholderMistakes lists the bool flags under cmd whose usage has a
// `backquoted` name: pflag shows it as the flag's value ("--new-sessions
// cexecctl exec"), which a bool flag does not take.
func placeholderMistakes(cmd *cobra.Command) []string {
	var out []string
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if name, _ := pflag.UnquoteUsage(f); f.Value.Type() == "bool" && name != "" {
			out = append(out, cmd.CommandPath()+" --"+f.Name+" "+name)
		}
	})
	for _, c := range cmd.Commands() {
		out = append(out, placeholderMistakes(c)...)
	}
	return out
}

func TestFlagUsagePlaceholders(t *testing.T) {
	withFlags := func(add func(*pflag.FlagSet)) *cobra.Command {
		c := &cobra.Command{Use: "x"}
		add(c.Flags())
		return c
	}
	tests := []struct {
		name string
		cmd  *cobra.Command
		want []string
	}{
		{"every cexecctl command", root(&cli.Env{}), nil},
		{"every cexecctl bench command (cexecctl-bench)", bench.Command(&cli.Env{}), nil},
		{"bool with a backquoted name", withFlags(func(f *pflag.FlagSet) {
			f.Bool("new", false, "as `cexecctl exec` runs are")
		}), []string{"x --new cexecctl exec"}},
		{"string names its value", withFlags(func(f *pflag.FlagSet) {
			f.String("out", "", "write to `FILE`")
		}), nil},
		{"bool without backquotes", withFlags(func(f *pflag.FlagSet) {
			f.Bool("new", false, `as "cexecctl exec" runs are`)
		}), nil},
	}
	for _, tt := range tests {
		if got := placeholderMistakes(tt.cmd); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestTimeoutFlag runs against no daemon: a bad --timeout is refused before
// cexecctl connects, a good one gets as far as connecting.
func TestTimeoutFlag(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"exec", "-c", "print(1)", "--timeout", "0s"}, cli.ExitUsage},
		{[]string{"exec", "-c", "print(1)", "--timeout", "-1s"}, cli.ExitUsage},
		{[]string{"task", "list the files", "--timeout", "0s"}, cli.ExitUsage},
		{[]string{"exec", "-c", "print(1)", "--timeout", "1s"}, cli.ExitNotRunning},
		{[]string{"exec", "-c", "print(1)"}, cli.ExitNotRunning},
		{[]string{"task", "list the files", "--timeout", "2m"}, cli.ExitNotRunning},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		cmd := root(&cli.Env{Stdout: &out, Stderr: &out})
		cmd.SetArgs(append([]string{"--address", sock}, tt.args...))
		err := cmd.ExecuteContext(context.Background())
		if got := cli.ExitCode(err); got != tt.want {
			t.Errorf("%v: exit %d (%v), want %d", tt.args, got, err, tt.want)
		}
	}
}
