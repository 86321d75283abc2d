package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client"
)

// Table prints rows in aligned columns, as every list command does.
type Table struct {
	tw *tabwriter.Writer
}

// NewTable starts a table on w with a header row, if any.
func NewTable(w io.Writer, header ...any) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.Row(header...)
	}
	return t
}

// Row adds a row; each cell prints as fmt.Print prints it.
func (t *Table) Row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

// Flush writes the table out.
func (t *Table) Flush() error {
	return t.tw.Flush()
}

// Dash is s, or "-" for an empty cell.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// YesNo is a boolean cell.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// List is a noun's `ls` command (alias list): run asks the daemon and
// prints the answer, as protobuf JSON with --json, else as a Table.
func List(env *Env, short string, run func(ctx context.Context, c *client.Client) error) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   short,
		Args:    Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error { return run(cmd.Context(), c) })
		},
	}
}
