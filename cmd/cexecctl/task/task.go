// Package task is `cexecctl task`: give cexecd a task in words; it selects
// the tools, has a generator write the program, runs and repairs it, and
// the answer is what the program printed. `cexecctl bench task` measures the
// pipeline's own overhead through the daemon.
package task

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Statuses of ExecuteTaskResponse.status.
const (
	statusOK     = "ok"
	statusFailed = "failed"
	statusNoCode = "no_code"
	statusDenied = "denied"
)

// Command returns the task command.
func Command(env *cli.Env) *cobra.Command {
	var (
		tenant  string
		session string
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   `task "TASK"`,
		Short: "Have cexecd write and run a program for a task given in words; prints its answer",
		Long: `Give cexecd a task in words. It searches the tools, has the configured
generators (pipeline.codegen in cexec.hcl) write a Python program, checks it
with the guards, runs it in a sandbox and, when it raises, regenerates it
with the traceback (pipeline.max_repairs).

What the program prints goes to stdout. A program that failed, a task no
generator could write a program for, and a program a guard denied are
reported on stderr and exit with status 1 (a failed program: its own exit
status when it has one). -v adds, on stderr, the generator, the tools, every
attempt, the timings and the program. --json prints all of it as one object.`,
		Example: `  cexecctl task "list the files"
  cexecctl task -v "remember that Alice works at Acme"
  cexecctl task --json "what is 2 + 3 * 4"`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[0]) == "" {
				return cli.UsageErrorf("the task is empty")
			}
			timeoutMs, err := cli.TimeoutMs(cmd.Flags(), "timeout")
			if err != nil {
				return err
			}
			req := &cexecv1.ExecuteTaskRequest{Tenant: tenant, Session: session, Task: args[0], TimeoutMs: timeoutMs}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				res, err := c.ExecuteTask(cmd.Context(), req)
				if err != nil {
					return err
				}
				if env.JSON {
					if err := env.PrintJSON(toJSON(res)); err != nil {
						return err
					}
				} else if err := show(env.Stdout, env.Stderr, res, verbose); err != nil {
					return err
				}
				return exitFor(res)
			})
		},
	}
	f := cmd.Flags()
	cli.TenantFlag(f, &tenant)
	f.StringVar(&session, "session", "", "session to log the executions under (default: a new one)")
	f.Duration("timeout", 0, "wall-clock limit of each program run, 1ms to 24h (default: the sandbox's)")
	f.BoolVarP(&verbose, "verbose", "v", false, "also show the generator, tools, attempts, timings and the program on stderr")
	return cmd
}

// exitFor maps the task's outcome to cexecctl's exit status.
func exitFor(res *cexecv1.ExecuteTaskResponse) error {
	switch res.GetStatus() {
	case statusOK:
		return nil
	case statusFailed:
		if code := int(res.GetResult().GetExitCode()); code > 0 {
			return &cli.ExitError{Code: code}
		}
	}
	return &cli.ExitError{Code: cli.ExitFailure}
}

// show prints the answer on stdout and everything else on stderr, so that
// the answer can be piped.
func show(stdout, stderr io.Writer, res *cexecv1.ExecuteTaskResponse, verbose bool) error {
	if verbose {
		details(stderr, res)
	}
	out := res.GetStdout()
	if out == "" && len(res.GetResult().GetResultJson()) > 0 {
		out = string(res.GetResult().GetResultJson()) + "\n"
	}
	if _, err := io.WriteString(stdout, out); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	switch res.GetStatus() {
	case statusFailed:
		e := res.GetResult().GetError()
		switch {
		case e.GetTraceback() != "":
			fmt.Fprint(stderr, e.GetTraceback())
		case e != nil:
			fmt.Fprintf(stderr, "%s: %s\n", e.GetType(), e.GetMessage())
		case res.GetResult().GetTimedOut():
			fmt.Fprintln(stderr, "cexecctl: the program timed out")
		default:
			fmt.Fprintf(stderr, "cexecctl: the program exited with status %d\n", res.GetResult().GetExitCode())
		}
		if n := res.GetRepairs(); n > 0 {
			fmt.Fprintf(stderr, "cexecctl: the program still failed after %d repair(s)\n", n)
		}
	case statusNoCode:
		fmt.Fprintln(stderr, "cexecctl: no generator wrote a program for the task:")
		diagnostics(stderr, res, false)
	case statusDenied:
		fmt.Fprintln(stderr, "cexecctl: a guard denied the program:")
		diagnostics(stderr, res, false)
	}
	if res.GetResult().GetOutputTruncated() {
		fmt.Fprintln(stderr, "cexecctl: output was truncated at the sandbox's output limit")
	}
	return nil
}

func diagnostics(w io.Writer, res *cexecv1.ExecuteTaskResponse, warnings bool) {
	for _, d := range res.GetDiagnostics() {
		if (d.GetSeverity() == "warning") != warnings {
			continue
		}
		fmt.Fprintln(w, "  "+cli.FormatDiagnostic(d))
	}
}

// details is the -v report.
func details(w io.Writer, res *cexecv1.ExecuteTaskResponse) {
	gen := res.GetGenerator()
	if gen == "" {
		gen = "(none)"
	}
	if m := res.GetModel(); m != "" {
		gen += " (" + m + ")"
	}
	fmt.Fprintf(w, "generator  %s, %d prompt + %d completion tokens\n", gen, res.GetPromptTokens(), res.GetCompletionTokens())
	fmt.Fprintf(w, "tools      %d selected of %d discovered\n", res.GetToolsSelected(), res.GetToolsDiscovered())
	fmt.Fprintf(w, "status     %s after %d attempt(s), %d repair(s)\n", res.GetStatus(), len(res.GetAttempts()), res.GetRepairs())
	for i, a := range res.GetAttempts() {
		scope := "selected"
		if a.GetWide() {
			scope = "wide"
		}
		outcome := "ran"
		switch {
		case a.GetError() != "":
			outcome = firstLine(a.GetError())
		case a.GetCode() == "":
			outcome = "no program"
		}
		fmt.Fprintf(w, "  %d. round %d, %s, %d %s tools, %s: %s\n", i+1, a.GetRound(), a.GetGenerator(), a.GetTools(), scope,
			us(a.GetGenerateUs()), outcome)
	}
	if tm := res.GetTimings(); tm != nil {
		fmt.Fprintf(w, "timings    search %s, generate %s, guard %s, execute %s, total %s; pipeline overhead %s\n",
			us(tm.GetSearchUs()), us(tm.GetGenerateUs()), us(tm.GetGuardUs()), us(tm.GetExecuteUs()), us(tm.GetTotalUs()),
			us(res.GetPipelineOverheadUs()))
	}
	if s := res.GetResult().GetSession(); s != "" {
		fmt.Fprintf(w, "session    %s\n", s)
	}
	diagnostics(w, res, true)
	if code := res.GetCode(); code != "" {
		fmt.Fprintf(w, "program:\n%s\n", strings.TrimRight(code, "\n"))
	}
	fmt.Fprintln(w, "---")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	// A traceback's last line names the exception.
	if strings.HasPrefix(s, "Traceback") {
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			return s[i+1:]
		}
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func us(v int64) string {
	return fmt.Sprintf("%.1fms", float64(v)/1000)
}

// jsonTask is the --json output: every field of the response, numbers as
// numbers.
type jsonTask struct {
	Status             string          `json:"status"`
	Stdout             string          `json:"stdout"`
	Result             json.RawMessage `json:"result,omitempty"`
	Error              *jsonError      `json:"error,omitempty"`
	ExitCode           int32           `json:"exit_code"`
	TimedOut           bool            `json:"timed_out"`
	OutputTruncated    bool            `json:"output_truncated"`
	Session            string          `json:"session,omitempty"`
	SandboxID          string          `json:"sandbox_id,omitempty"`
	Generator          string          `json:"generator"`
	Model              string          `json:"model"`
	Code               string          `json:"code"`
	PromptTokens       int64           `json:"prompt_tokens"`
	CompletionTokens   int64           `json:"completion_tokens"`
	ToolsDiscovered    int32           `json:"tools_discovered"`
	ToolsSelected      int32           `json:"tools_selected"`
	Repairs            int32           `json:"repairs"`
	PipelineOverheadUs int64           `json:"pipeline_overhead_us"`
	Timings            jsonTimings     `json:"timings"`
	Attempts           []jsonAttempt   `json:"attempts"`
	Diagnostics        []jsonDiag      `json:"diagnostics"`
	ToolCalls          []jsonToolCall  `json:"tool_calls"`
	Warnings           []string        `json:"warnings,omitempty"`
}

type jsonError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

type jsonTimings struct {
	SearchUs   int64 `json:"search_us"`
	GenerateUs int64 `json:"generate_us"`
	GuardUs    int64 `json:"guard_us"`
	ExecuteUs  int64 `json:"execute_us"`
	TotalUs    int64 `json:"total_us"`
}

type jsonAttempt struct {
	Generator        string `json:"generator"`
	Model            string `json:"model,omitempty"`
	Round            int32  `json:"round"`
	Tools            int32  `json:"tools"`
	Wide             bool   `json:"wide"`
	Code             string `json:"code,omitempty"`
	Error            string `json:"error,omitempty"`
	GenerateUs       int64  `json:"generate_us"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

type jsonDiag struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
}

type jsonToolCall struct {
	Server     string  `json:"server"`
	Tool       string  `json:"tool"`
	DurationMS float64 `json:"duration_ms"`
	OK         bool    `json:"ok"`
	Error      string  `json:"error,omitempty"`
}

func toJSON(res *cexecv1.ExecuteTaskResponse) jsonTask {
	r := res.GetResult()
	out := jsonTask{
		Status:             res.GetStatus(),
		Stdout:             res.GetStdout(),
		ExitCode:           r.GetExitCode(),
		TimedOut:           r.GetTimedOut(),
		OutputTruncated:    r.GetOutputTruncated(),
		Session:            r.GetSession(),
		SandboxID:          r.GetSandboxId(),
		Generator:          res.GetGenerator(),
		Model:              res.GetModel(),
		Code:               res.GetCode(),
		PromptTokens:       res.GetPromptTokens(),
		CompletionTokens:   res.GetCompletionTokens(),
		ToolsDiscovered:    res.GetToolsDiscovered(),
		ToolsSelected:      res.GetToolsSelected(),
		Repairs:            res.GetRepairs(),
		PipelineOverheadUs: res.GetPipelineOverheadUs(),
		Timings: jsonTimings{
			SearchUs:   res.GetTimings().GetSearchUs(),
			GenerateUs: res.GetTimings().GetGenerateUs(),
			GuardUs:    res.GetTimings().GetGuardUs(),
			ExecuteUs:  res.GetTimings().GetExecuteUs(),
			TotalUs:    res.GetTimings().GetTotalUs(),
		},
		Attempts:    []jsonAttempt{},
		Diagnostics: []jsonDiag{},
		ToolCalls:   []jsonToolCall{},
		Warnings:    r.GetWarnings(),
	}
	if len(r.GetResultJson()) > 0 {
		out.Result = r.GetResultJson()
	}
	if e := r.GetError(); e != nil {
		out.Error = &jsonError{Type: e.GetType(), Message: e.GetMessage(), Traceback: e.GetTraceback()}
	}
	for _, a := range res.GetAttempts() {
		out.Attempts = append(out.Attempts, jsonAttempt{
			Generator: a.GetGenerator(), Model: a.GetModel(), Round: a.GetRound(), Tools: a.GetTools(), Wide: a.GetWide(),
			Code: a.GetCode(), Error: a.GetError(), GenerateUs: a.GetGenerateUs(),
			PromptTokens: a.GetPromptTokens(), CompletionTokens: a.GetCompletionTokens(),
		})
	}
	for _, d := range res.GetDiagnostics() {
		out.Diagnostics = append(out.Diagnostics, jsonDiag{Severity: d.GetSeverity(), Summary: d.GetSummary(), Detail: d.GetDetail()})
	}
	for _, tc := range r.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, jsonToolCall{
			Server: tc.GetServer(), Tool: tc.GetTool(), DurationMS: float64(tc.GetDurationUs()) / 1000, OK: tc.GetOk(), Error: tc.GetError(),
		})
	}
	return out
}
