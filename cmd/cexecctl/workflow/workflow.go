// Package workflow is `cexecctl workflow`: validate Serverless Workflow
// documents, run them in cexecd's durable engine and follow, signal,
// resume and cancel their runs.
package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/plural"
)

// pollEvery is how often run follows a run's progress.
const pollEvery = 250 * time.Millisecond

// Command returns the workflow command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	var tenant string
	cmd := cli.Group(&cobra.Command{
		Use:   "workflow",
		Short: "Validate and run workflows (Serverless Workflow DSL 1.0) and follow their runs",
		Long: `Workflows are Serverless Workflow (Open Workflow Specification) DSL 1.0
documents in YAML or JSON: call: mcp tasks call configured upstream servers,
run: script tasks run Python in the tenant's sandbox, and set, switch, for,
fork, try/retry, raise, wait and listen steer them. cexecd journals every
task's result in the tenant's data, so a run resumes after a crash without
running a finished task again. See docs/WORKFLOWS.md.`,
	})
	cli.TenantFlag(cmd.PersistentFlags(), &tenant)
	cmd.AddCommand(validate(env), run(env, &tenant), ls(env, &tenant), status(env, &tenant), logs(env, &tenant),
		resume(env, &tenant), cancel(env, &tenant), signal(env, &tenant), save(env, &tenant))
	return cmd
}

func validate(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check documents; every problem is printed as file:line:col",
		Args:  cli.Args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				bad := 0
				var all []*cexecv1.ValidateWorkflowResponse
				for _, f := range args {
					src, err := os.ReadFile(f)
					if err != nil {
						return err
					}
					r, err := c.Workflows().Validate(cmd.Context(), f, src)
					if err != nil {
						return err
					}
					all = append(all, r)
					bad += len(r.GetDiagnostics())
					if env.JSON {
						continue
					}
					for _, d := range r.GetDiagnostics() {
						fmt.Fprintf(env.Stdout, "%s:%d:%d: %s\n", d.GetFile(), d.GetLine(), d.GetColumn(), d.GetMessage())
					}
					if len(r.GetDiagnostics()) == 0 {
						fmt.Fprintf(env.Stdout, "%s: ok (%s)\n", f, r.GetName())
					}
				}
				if env.JSON {
					if err := env.PrintJSON(all); err != nil {
						return err
					}
				}
				if bad > 0 {
					return &cli.ExitError{Code: cli.ExitFailure, Err: errors.New(plural.Count(bad, "problem"))}
				}
				return nil
			})
		},
	}
}

func run(env *cli.Env, tenant *string) *cobra.Command {
	var input string
	var detach bool
	cmd := &cobra.Command{
		Use:   "run FILE|NAME [--input JSON] [--detach]",
		Short: "Start a run of a document or a stored workflow and follow it to its end",
		Long: `Start a run of the document FILE, or of the stored workflow NAME (cexecctl
workflow ls --stored), with --input as the workflow's input. Without --detach
it follows the run: each finished task on standard error, a listen waiting
for a signal, and the output at the end; the exit status is 1 when the run
failed. Interrupting cexecctl does not stop the run (cexecctl workflow cancel
does).`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &cexecv1.StartWorkflowRequest{Tenant: *tenant, InputJson: input}
			if src, err := os.ReadFile(args[0]); err == nil {
				req.File, req.Source = args[0], src
			} else if strings.ContainsAny(args[0], "/.") {
				return err
			} else {
				req.Name = args[0]
			}
			if input != "" && !json.Valid([]byte(input)) {
				return cli.UsageErrorf("--input is not JSON: %s", input)
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.Workflows().Start(cmd.Context(), req)
				if err != nil {
					return err
				}
				if detach {
					return printRun(env, r)
				}
				if !env.JSON {
					fmt.Fprintf(cmd.ErrOrStderr(), "run %s of %s started\n", r.GetRun(), r.GetWorkflow())
				}
				return follow(cmd.Context(), env, c, cmd.ErrOrStderr(), r)
			})
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "the workflow's input, JSON")
	cmd.Flags().BoolVar(&detach, "detach", false, "print the run and return at once")
	return cmd
}

// follow polls a run until it ends, reporting progress on w.
func follow(ctx context.Context, env *cli.Env, c *client.Client, w io.Writer, r *cexecv1.WorkflowRun) error {
	lastDone, lastWait := int32(-1), ""
	for {
		if !env.JSON {
			if r.GetTasksDone() != lastDone && r.GetTask() != "" {
				fmt.Fprintf(w, "  %d tasks done, at %s (%s)\n", r.GetTasksDone(), r.GetTask(), r.GetState())
			}
			for _, p := range r.GetWaiting() {
				if key := p.GetPath() + strings.Join(p.GetEvents(), ","); key != lastWait {
					lastWait = key
					fmt.Fprintf(w, "  waiting in %s for %s: cexecctl workflow signal %s %s --data JSON\n",
						p.GetTask(), strings.Join(p.GetEvents(), " or "), r.GetRun(), p.GetEvents()[0])
				}
			}
		}
		lastDone = r.GetTasksDone()
		if r.GetEndedUnixMs() != 0 {
			if err := printRun(env, r); err != nil {
				return err
			}
			if r.GetState() != "completed" {
				return &cli.ExitError{Code: cli.ExitFailure}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
		var err error
		if r, err = c.Workflows().Get(ctx, r.GetTenant(), r.GetRun()); err != nil {
			return err
		}
	}
}

func printRun(env *cli.Env, r *cexecv1.WorkflowRun) error {
	if env.JSON {
		return env.PrintProto(r)
	}
	w := env.Stdout
	fmt.Fprintf(w, "run:      %s\nworkflow: %s\nstate:    %s\ntasks:    %d done\nstarted:  %s\n",
		r.GetRun(), r.GetWorkflow(), r.GetState(), r.GetTasksDone(), cli.UnixMs(r.GetStartedUnixMs()))
	if r.GetEndedUnixMs() != 0 {
		fmt.Fprintf(w, "ended:    %s\n", cli.UnixMs(r.GetEndedUnixMs()))
	} else if r.GetTask() != "" {
		fmt.Fprintf(w, "task:     %s\n", r.GetTask())
	}
	for _, p := range r.GetWaiting() {
		events, event := strings.Join(p.GetEvents(), " or "), "EVENT"
		// "" (or no event listed) is a listen that takes any event.
		if evs := p.GetEvents(); len(evs) == 0 || slices.Contains(evs, "") {
			events = "any event"
		} else {
			event = evs[0]
		}
		fmt.Fprintf(w, "waiting:  %s for %s (cexecctl workflow signal %s %s --data JSON)\n", p.GetTask(), events, r.GetRun(), event)
	}
	if r.GetOutputJson() != "" {
		fmt.Fprintf(w, "output:   %s\n", r.GetOutputJson())
	}
	if r.GetErrorJson() != "" {
		fmt.Fprintf(w, "error:    %s\n", r.GetErrorJson())
	}
	return nil
}

func ls(env *cli.Env, tenant *string) *cobra.Command {
	var stored bool
	cmd := cli.List(env, "List the tenant's runs (RUN WORKFLOW STATE TASKS STARTED), or with --stored its workflow documents", func(ctx context.Context, c *client.Client) error {
		if stored {
			ws, err := c.Workflows().Stored(ctx, *tenant)
			if err != nil {
				return err
			}
			if env.JSON {
				return env.PrintProto(&cexecv1.ListWorkflowsResponse{Workflows: ws})
			}
			t := cli.NewTable(env.Stdout, "NAME", "SCOPE", "FILE")
			for _, w := range ws {
				scope := "tenant"
				if w.GetShared() {
					scope = "shared"
				}
				t.Row(w.GetName(), scope, w.GetFile())
			}
			return t.Flush()
		}
		runs, err := c.Workflows().Runs(ctx, *tenant)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListWorkflowRunsResponse{Runs: runs})
		}
		t := cli.NewTable(env.Stdout, "RUN", "WORKFLOW", "STATE", "TASKS", "STARTED")
		for _, r := range runs {
			t.Row(r.GetRun(), r.GetWorkflow(), r.GetState(), r.GetTasksDone(), cli.UnixMs(r.GetStartedUnixMs()))
		}
		return t.Flush()
	})
	cmd.Flags().BoolVar(&stored, "stored", false, "list stored workflow documents instead of runs")
	return cmd
}

// runCmd is a subcommand on one run.
func runCmd(env *cli.Env, use, short string, fn func(ctx context.Context, c *client.Client, run string) (*cexecv1.WorkflowRun, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use + " RUN",
		Short: short,
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := fn(cmd.Context(), c, args[0])
				if err != nil {
					return err
				}
				return printRun(env, r)
			})
		},
	}
}

func status(env *cli.Env, tenant *string) *cobra.Command {
	return runCmd(env, "status", "Show a run: state, tasks done, what it waits for, output or error",
		func(ctx context.Context, c *client.Client, run string) (*cexecv1.WorkflowRun, error) {
			return c.Workflows().Get(ctx, *tenant, run)
		})
}

func resume(env *cli.Env, tenant *string) *cobra.Command {
	return runCmd(env, "resume", "Continue an interrupted or failed run; finished tasks are not run again",
		func(ctx context.Context, c *client.Client, run string) (*cexecv1.WorkflowRun, error) {
			return c.Workflows().Resume(ctx, *tenant, run)
		})
}

func cancel(env *cli.Env, tenant *string) *cobra.Command {
	return runCmd(env, "cancel", "Stop a run: waits up to 3 s for it to end, then shows it cancelled (or cancelling, still stopping)",
		func(ctx context.Context, c *client.Client, run string) (*cexecv1.WorkflowRun, error) {
			return c.Workflows().Cancel(ctx, *tenant, run)
		})
}

func logs(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "logs RUN",
		Short: "Print a run's journal: one line per record (task started, done, caught, signal …)",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				recs, err := c.Workflows().Logs(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				if env.JSON {
					for _, r := range recs {
						fmt.Fprintln(env.Stdout, r)
					}
					return nil
				}
				t := cli.NewTable(env.Stdout, "SEQ", "TIME", "KIND", "TASK", "DETAIL")
				for _, line := range recs {
					var r struct {
						Seq                             int
						Time                            time.Time
						Kind, Path, Event, Status, Flow string
						Output, Data, Error             json.RawMessage
					}
					if err := json.Unmarshal([]byte(line), &r); err != nil {
						return err
					}
					detail := ""
					switch {
					case len(r.Error) > 0:
						detail = string(r.Error)
					case r.Event != "":
						detail = r.Event + " " + string(r.Data)
					case r.Status != "":
						detail = r.Status
					case len(r.Output) > 0:
						detail = string(r.Output)
					}
					t.Row(r.Seq, r.Time.UTC().Format("15:04:05.000"), r.Kind, cli.Dash(r.Path), cli.FirstLine(detail, 100))
				}
				return t.Flush()
			})
		},
	}
}

func signal(env *cli.Env, tenant *string) *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "signal RUN EVENT [--data JSON]",
		Short: "Answer a run's listen waiting for EVENT with --data",
		Args:  cli.Args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if data != "" && !json.Valid([]byte(data)) {
				return cli.UsageErrorf("--data is not JSON: %s", data)
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.Workflows().Signal(cmd.Context(), *tenant, args[0], args[1], data)
				if err != nil {
					return err
				}
				return printRun(env, r)
			})
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the event's data, JSON")
	return cmd
}

func save(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "save NAME FILE",
		Short: "Validate a document and store it as the tenant's workflow NAME",
		Args:  cli.Args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[1])
			if err != nil {
				return err
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				// Validated under the file's own name first, so that its
				// problems point into FILE, not the NAME.yaml it becomes.
				r, err := c.Workflows().Validate(cmd.Context(), args[1], src)
				if err != nil {
					return err
				}
				if ds := r.GetDiagnostics(); len(ds) > 0 {
					for _, d := range ds {
						fmt.Fprintf(env.Stderr, "%s:%d:%d: %s\n", d.GetFile(), d.GetLine(), d.GetColumn(), d.GetMessage())
					}
					return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("save workflow %s: %s in %s", args[0], plural.Count(len(ds), "problem"), args[1])}
				}
				w, err := c.Workflows().Save(cmd.Context(), *tenant, args[0], src)
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(w)
				}
				fmt.Fprintf(env.Stdout, "saved workflow %s (%s)\n", w.GetName(), w.GetFile())
				return nil
			})
		},
	}
}
