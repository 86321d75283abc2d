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

// entry is a session log line as cexecctl shows it (core/workspace.Entry on
// the wire).
type entry struct {
	Seq        int64           `json:"seq"`
	Time       time.Time       `json:"time"`
	Kind       string          `json:"kind"`
	Task       string          `json:"task"`
	Code       string          `json:"code"`
	Result     *result         `json:"result"`
	ToolCalls  []toolCall      `json:"tool_calls"`
	DurationMS float64         `json:"duration_ms"`
	StateFiles []string        `json:"state_files"`
	Step       string          `json:"step"`
	Context    json.RawMessage `json:"context"`
	Skill      string          `json:"skill"`
}

type result struct {
	OK        bool            `json:"ok"`
	ExitCode  int             `json:"exit_code"`
	ErrorType string          `json:"error_type"`
	Error     string          `json:"error"`
	Output    string          `json:"output"`
	Value     json.RawMessage `json:"value"`
	TimedOut  bool            `json:"timed_out"`
}

type toolCall struct {
	Server     string  `json:"server"`
	Tool       string  `json:"tool"`
	DurationMS float64 `json:"duration_ms"`
	OK         bool    `json:"ok"`
}

func show(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "show SESSION",
		Short: "Print a session's log: executions, checkpoints and saved skills",
		Long: `Print a session's log. With --json: {"entries": [...], "skipped": N}, the
entries as logged; skipped counts damaged lines left out (a torn last line
from a crash).`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.GetSession(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				lines := bytes.Split(bytes.TrimSpace(r.GetEntriesJsonl()), []byte("\n"))
				if env.JSON {
					raw := []json.RawMessage{}
					for _, l := range lines {
						if len(l) > 0 {
							raw = append(raw, l)
						}
					}
					return env.PrintJSON(map[string]any{"session": args[0], "entries": raw, "skipped": r.GetSkipped()})
				}
				for _, l := range lines {
					if len(l) == 0 {
						continue
					}
					var e entry
					if err := json.Unmarshal(l, &e); err != nil {
						return fmt.Errorf("session %s: decode entry: %w", args[0], err)
					}
					writeEntry(env.Stdout, &e)
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
func writeEntry(w io.Writer, e *entry) {
	fmt.Fprintf(w, "#%d %s %s", e.Seq, e.Time.Local().Format(time.RFC3339), e.Kind)
	switch e.Kind {
	case "execution":
		if r := e.Result; r != nil {
			switch {
			case r.OK:
				fmt.Fprint(w, " ok")
			case r.TimedOut:
				fmt.Fprint(w, " timed out")
			default:
				fmt.Fprintf(w, " failed (%s)", cli.Dash(r.ErrorType))
			}
		}
		fmt.Fprintf(w, " %.1f ms\n", e.DurationMS)
		if e.Task != "" {
			fmt.Fprintf(w, "  task:   %s\n", oneLine(e.Task))
		}
		fmt.Fprintf(w, "  code:   %s\n", oneLine(e.Code))
		if r := e.Result; r != nil {
			if r.Output != "" {
				fmt.Fprintf(w, "  output: %s\n", oneLine(r.Output))
			}
			if len(r.Value) > 0 {
				fmt.Fprintf(w, "  result: %s\n", oneLine(string(r.Value)))
			}
			if r.Error != "" {
				fmt.Fprintf(w, "  error:  %s\n", oneLine(r.Error))
			}
		}
		for _, tc := range e.ToolCalls {
			ok := "ok"
			if !tc.OK {
				ok = "failed"
			}
			fmt.Fprintf(w, "  tool:   %s.%s %s %.1f ms\n", tc.Server, tc.Tool, ok, tc.DurationMS)
		}
		if len(e.StateFiles) > 0 {
			fmt.Fprintf(w, "  state:  %s\n", strings.Join(e.StateFiles, ", "))
		}
	case "checkpoint":
		fmt.Fprintf(w, " %s\n", e.Step)
		if len(e.Context) > 0 && string(e.Context) != "null" {
			fmt.Fprintf(w, "  context: %s\n", oneLine(string(e.Context)))
		}
	case "skill":
		fmt.Fprintf(w, " %s saved\n", e.Skill)
	default:
		fmt.Fprintln(w)
	}
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

// resumption is ResumeSession's JSON.
type resumption struct {
	Session struct {
		ID           string    `json:"id"`
		Created      time.Time `json:"created"`
		LastActivity time.Time `json:"last_activity"`
		Entries      int64     `json:"entries"`
		Executions   int64     `json:"executions"`
		Failures     int64     `json:"failures"`
		Checkpoints  int64     `json:"checkpoints"`
		LastTask     string    `json:"last_task"`
		StateFiles   []string  `json:"state_files"`
	} `json:"session"`
	Checkpoint *entry  `json:"checkpoint"`
	Recent     []entry `json:"recent"`
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
				raw, err := c.ResumeSession(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				if env.JSON {
					var buf bytes.Buffer
					if err := json.Indent(&buf, raw, "", "  "); err != nil {
						return fmt.Errorf("resume session %s: the daemon answered invalid JSON: %w", args[0], err)
					}
					buf.WriteByte('\n')
					_, err := env.Stdout.Write(buf.Bytes())
					return err
				}
				var r resumption
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("resume session %s: %w", args[0], err)
				}
				s := r.Session
				w := env.Stdout
				fmt.Fprintf(w, "session %s: %d entries, %d executions (%d failed), %d checkpoints\n", s.ID, s.Entries, s.Executions, s.Failures, s.Checkpoints)
				fmt.Fprintf(w, "started %s, last active %s\n", s.Created.Local().Format(time.RFC3339), s.LastActivity.Local().Format(time.RFC3339))
				if len(s.StateFiles) > 0 {
					fmt.Fprintf(w, "state files touched: %s\n", strings.Join(s.StateFiles, ", "))
				}
				if cp := r.Checkpoint; cp != nil {
					fmt.Fprintf(w, "\nlast checkpoint: #%d %s at %s\n", cp.Seq, cp.Step, cp.Time.Local().Format(time.RFC3339))
					if len(cp.Context) > 0 && string(cp.Context) != "null" {
						var buf bytes.Buffer
						if json.Indent(&buf, cp.Context, "", "  ") == nil {
							fmt.Fprintf(w, "context:\n%s\n", buf.String())
						}
					}
				} else {
					fmt.Fprintln(w, "\nno checkpoint yet")
				}
				if len(r.Recent) > 0 {
					fmt.Fprintln(w, "\nlast entries:")
					for i := range r.Recent {
						writeEntry(w, &r.Recent[i])
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
