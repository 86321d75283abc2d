// Package sessions is `cexecctl sessions`: list a tenant's sessions, show a
// session's log, resume one from its last checkpoint, and record a
// checkpoint.
package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the sessions command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	var tenant string
	cmd := cli.Group(&cobra.Command{
		Use:   "sessions",
		Short: "Inspect and resume a tenant's sessions",
		Long: `Every execution belongs to a session: the one named with exec --session or
by the MCP client, else a new one. A session's log records each execution
(task, code, result, tool calls, duration, state files touched), the
checkpoints its code made with cexec.checkpoint(step, context), and the
skills it saved. Logs live outside the workspace and survive restarts.`,
	})
	cli.TenantFlag(cmd.PersistentFlags(), &tenant)
	cmd.AddCommand(ls(env, &tenant), show(env, &tenant), resume(env, &tenant), checkpoint(env, &tenant))
	return cmd
}

func ls(env *cli.Env, tenant *string) *cobra.Command {
	return cli.List(env, "List sessions, most recent first: ID ENTRIES EXECS FAILED CHECKPOINTS LAST-ACTIVITY LAST-STEP", func(ctx context.Context, c *client.Client) error {
		ss, err := c.ListSessions(ctx, *tenant)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListSessionsResponse{Sessions: ss})
		}
		t := cli.NewTable(env.Stdout, "ID", "ENTRIES", "EXECS", "FAILED", "CHECKPOINTS", "LAST-ACTIVITY", "LAST-STEP")
		for _, s := range ss {
			t.Row(s.GetId(), s.GetEntries(), s.GetExecutions(), s.GetFailures(),
				s.GetCheckpoints(), cli.UnixMs(s.GetLastUnixMs()), cli.Dash(s.GetLastCheckpoint()))
		}
		return t.Flush()
	})
}

func show(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "show SESSION",
		Short: "Print a session's log: executions, checkpoints and saved skills",
		Long: `Print a session's log. With --json: {"entries": [...], "skipped": N}, each
entry's set fields as the API's SessionEntry names them (context and result
value as JSON values); skipped counts damaged lines left out (a torn last
line from a crash).`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.GetSession(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				if env.JSON {
					entries := make([]json.RawMessage, 0, len(r.GetEntries()))
					for _, e := range r.GetEntries() {
						b, err := protoJSON(e.ProtoReflect())
						if err != nil {
							return fmt.Errorf("session %s: entry %d: %w", args[0], e.GetSeq(), err)
						}
						entries = append(entries, b)
					}
					return env.PrintJSON(map[string]any{"session": args[0], "entries": entries, "skipped": r.GetSkipped()})
				}
				for _, e := range r.GetEntries() {
					writeEntry(env.Stdout, e)
				}
				if n := r.GetSkipped(); n > 0 {
					fmt.Fprintf(env.Stdout, "(%d damaged line(s) left out)\n", n)
				}
				return nil
			})
		},
	}
}

// writeEntry prints one entry: a header line, then indented details.
func writeEntry(w io.Writer, e *cexecv1.SessionEntry) {
	fmt.Fprintf(w, "#%d %s %s", e.GetSeq(), rfc3339(e.GetTimeUnixMs()), e.GetKind())
	switch e.GetKind() {
	case "execution":
		if r := e.GetResult(); r != nil {
			switch {
			case r.GetOk():
				fmt.Fprint(w, " ok")
			case r.GetTimedOut():
				fmt.Fprint(w, " timed out")
			default:
				fmt.Fprintf(w, " failed (%s)", cli.Dash(r.GetErrorType()))
			}
		}
		fmt.Fprintf(w, " %.1f ms\n", e.GetDurationMs())
		if e.GetTask() != "" {
			fmt.Fprintf(w, "  task:   %s\n", oneLine(e.GetTask()))
		}
		fmt.Fprintf(w, "  code:   %s\n", oneLine(e.GetCode()))
		if e.GetInterpreter() != "" {
			fmt.Fprintf(w, "  persistent, in sandbox %s\n", e.GetInterpreter())
		}
		// Whole: the reason is at the end of a warning, past oneLine's cut.
		for _, warning := range e.GetWarnings() {
			fmt.Fprintf(w, "  warning: %s\n", strings.Join(strings.Fields(warning), " "))
		}
		if r := e.GetResult(); r != nil {
			if r.GetOutput() != "" {
				fmt.Fprintf(w, "  output: %s\n", oneLine(r.GetOutput()))
			}
			if len(r.GetValueJson()) > 0 {
				fmt.Fprintf(w, "  result: %s\n", oneLine(string(r.GetValueJson())))
			}
			if r.GetError() != "" {
				fmt.Fprintf(w, "  error:  %s\n", oneLine(r.GetError()))
			}
		}
		for _, tc := range e.GetToolCalls() {
			ok := "ok"
			if !tc.GetOk() {
				ok = "failed"
			}
			fmt.Fprintf(w, "  tool:   %s.%s %s %.1f ms", tc.GetServer(), tc.GetTool(), ok, tc.GetDurationMs())
			if a := tc.GetApproval(); a != "" {
				fmt.Fprintf(w, " (%s)", a)
			}
			fmt.Fprintln(w)
		}
		for _, l := range e.GetUpstreamLog() {
			fmt.Fprintf(w, "  log:    %s %s", l.GetServer(), l.GetLevel())
			if l.GetLogger() != "" {
				fmt.Fprintf(w, " (%s)", l.GetLogger())
			}
			switch {
			case l.GetWithheld():
				fmt.Fprintln(w, ": withheld, it could not be checked for sensitive data")
			case l.GetTruncated():
				fmt.Fprintln(w, ": dropped, over 4 KiB")
			default:
				fmt.Fprintf(w, ": %s\n", oneLine(string(l.GetDataJson())))
			}
		}
		if len(e.GetStateFiles()) > 0 {
			fmt.Fprintf(w, "  state:  %s\n", strings.Join(e.GetStateFiles(), ", "))
		}
	case "checkpoint":
		fmt.Fprintf(w, " %s\n", e.GetStep())
		if ctx := e.GetContextJson(); len(ctx) > 0 && string(ctx) != "null" {
			fmt.Fprintf(w, "  context: %s\n", oneLine(string(ctx)))
		}
	case "skill":
		fmt.Fprintf(w, " %s saved\n", e.GetSkill())
	default:
		fmt.Fprintln(w)
	}
}

// rfc3339 is a time in Unix milliseconds as local RFC 3339 to the second.
func rfc3339(ms int64) string {
	return time.UnixMilli(ms).Format(time.RFC3339)
}

// oneLine shows the first line of s, cut to 100 characters, marking what
// was left out.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	first, cut := lines[0], false
	if r := []rune(first); len(r) > 100 {
		first, cut = string(r[:100]), true
	}
	switch {
	case len(lines) > 1:
		return fmt.Sprintf("%s … (+%d lines)", first, len(lines)-1)
	case cut:
		return first + " …"
	}
	return first
}

func resume(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "resume SESSION",
		Short: "Show where a session left off: its last checkpoint with context, and its last entries",
		Long: `Show what an agent needs to pick a session up again: the session's summary,
its last checkpoint (step and context) and its last few entries. Continue the
session with exec --session SESSION; the code can read the checkpoint's
state files with cexec.get_state.`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.ResumeSession(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				if env.JSON {
					raw, err := protoJSON(r.ProtoReflect())
					if err != nil {
						return fmt.Errorf("resume session %s: %w", args[0], err)
					}
					var buf bytes.Buffer
					if err := json.Indent(&buf, raw, "", "  "); err != nil {
						return fmt.Errorf("resume session %s: %w", args[0], err)
					}
					buf.WriteByte('\n')
					_, err = env.Stdout.Write(buf.Bytes())
					return err
				}
				s := r.GetSession()
				w := env.Stdout
				fmt.Fprintf(w, "session %s: %d entries, %d executions (%d failed), %d checkpoints\n", s.GetId(), s.GetEntries(), s.GetExecutions(), s.GetFailures(), s.GetCheckpoints())
				fmt.Fprintf(w, "started %s, last active %s\n", rfc3339(s.GetStartedUnixMs()), rfc3339(s.GetLastUnixMs()))
				if len(s.GetStateFiles()) > 0 {
					fmt.Fprintf(w, "state files touched: %s\n", strings.Join(s.GetStateFiles(), ", "))
				}
				if cp := r.GetCheckpoint(); cp != nil {
					fmt.Fprintf(w, "\nlast checkpoint: #%d %s at %s\n", cp.GetSeq(), cp.GetStep(), rfc3339(cp.GetTimeUnixMs()))
					if ctx := cp.GetContextJson(); len(ctx) > 0 && string(ctx) != "null" {
						var buf bytes.Buffer
						if json.Indent(&buf, ctx, "", "  ") == nil {
							fmt.Fprintf(w, "context:\n%s\n", buf.String())
						}
					}
				} else {
					fmt.Fprintln(w, "\nno checkpoint yet")
				}
				if len(r.GetRecent()) > 0 {
					fmt.Fprintln(w, "\nlast entries:")
					for _, e := range r.GetRecent() {
						writeEntry(w, e)
					}
				}
				return nil
			})
		},
	}
}

func checkpoint(env *cli.Env, tenant *string) *cobra.Command {
	var ctxArg string
	cmd := &cobra.Command{
		Use:   "checkpoint SESSION STEP",
		Short: "Record a checkpoint in a session, as cexec.checkpoint does from code",
		Args:  cli.Args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ctxJSON json.RawMessage
			if ctxArg != "" {
				if !json.Valid([]byte(ctxArg)) {
					return cli.UsageErrorf("--context is not valid JSON: %s", ctxArg)
				}
				ctxJSON = json.RawMessage(ctxArg)
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				seq, err := c.Checkpoint(cmd.Context(), *tenant, args[0], args[1], ctxJSON)
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintJSON(map[string]any{"session": args[0], "seq": seq})
				}
				_, err = fmt.Fprintf(env.Stdout, "checkpoint #%d %s recorded in session %s\n", seq, args[1], args[0])
				return err
			})
		},
	}
	cmd.Flags().StringVar(&ctxArg, "context", "", "JSON value to resume from (default null)")
	return cmd
}
