// Package exec is `cexecctl exec`: run Python in a pooled sandbox of the
// daemon, with output streamed live and the exit code mirrored.
package exec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/maxprocs"
)

// Command returns the exec command.
func Command(env *cli.Env) *cobra.Command {
	var (
		code       string
		tenant     string
		session    string
		persistent bool
		ask        bool
		saveDir    string
	)
	cmd := &cobra.Command{
		Use:   "exec [-c CODE | FILE | -]",
		Short: "Run Python in a sandbox; output streams live and the exit code is the program's",
		Long: `Run a Python program in one of the daemon's pooled sandboxes.

The program comes from -c, from FILE, or from standard input (no argument or
"-"). stdout and stderr stream as the program writes them; cexecctl exits
with the program's exit code. With --json nothing streams: one JSON object
with stdout, stderr, result, error, duration and resource usage is printed
when the program ends.

When an upstream server asks for input during a tool call (MCP elicitation),
or a tenant policy wants a call approved, cexecctl asks on the terminal and
sends the answer: when standard input is a terminal and the program does not
come from it, or with --ask (answers then come from standard input, one per
line). Otherwise the server gets a decline, and an approval waits for
` + "`cexecctl approvals`" + `.

What the program shows with cexec.show (images, audio, files) is listed on
stderr after its output, e.g. "[image/png 95 bytes]"; --save-attachments DIR
writes the inline ones into DIR (larger ones are saved in the tenant's
workspace, whose path is listed).`,
		Args: cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			maxprocs.Set() // on an execution's path, as cexecd is
			timeoutMs, err := cli.TimeoutMs(cmd.Flags(), "timeout")
			if err != nil {
				return err
			}
			src, err := source(cmd, code, args)
			if err != nil {
				return err
			}
			req := &cexecv1.ExecRequest{
				Tenant:     tenant,
				Code:       src,
				TimeoutMs:  timeoutMs,
				Session:    session,
				Persistent: persistent,
			}
			fromStdin := !cmd.Flags().Changed("code") && (len(args) == 0 || args[0] == "-")
			if ask && fromStdin {
				return cli.UsageErrorf("--ask reads answers from standard input: give the program with -c or as FILE")
			}
			var p *prompter
			if ask || !fromStdin && isTerminal(cmd.InOrStdin()) {
				p = newPrompter(cmd.InOrStdin(), env.Stderr)
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				return run(cmd, env, c, req, p, saveDir)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&code, "code", "c", "", "program text")
	cli.TenantFlag(f, &tenant)
	f.StringVar(&session, "session", "", "session to log the execution under (default: a new one)")
	f.Duration("timeout", 0, "wall-clock limit, 1ms to 24h (default: the sandbox's)")
	f.BoolVar(&persistent, "persistent", false, "run in the session's persistent interpreter, keeping globals between executions")
	f.BoolVar(&ask, "ask", false, "answer upstream servers' questions and approvals from standard input (the default on a terminal)")
	f.StringVar(&saveDir, "save-attachments", "", "write what the program shows (cexec.show) into this directory")
	return cmd
}

func source(cmd *cobra.Command, code string, args []string) (string, error) {
	switch {
	case cmd.Flags().Changed("code") && len(args) > 0:
		return "", cli.UsageErrorf("give the program with -c or as FILE, not both")
	case cmd.Flags().Changed("code"):
		return code, nil
	case len(args) == 1 && args[0] != "-":
		b, err := os.ReadFile(args[0])
		if err != nil {
			return "", fmt.Errorf("read program: %w", err)
		}
		return string(b), nil
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return "", fmt.Errorf("read program from stdin: %w", err)
	}
	return string(b), nil
}

// jsonResult is the --json output.
type jsonResult struct {
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	ExitCode        int32           `json:"exit_code"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           *jsonError      `json:"error,omitempty"`
	DurationMS      float64         `json:"duration_ms"`
	CPUMS           int64           `json:"cpu_ms"`
	MaxRSSBytes     int64           `json:"max_rss_bytes"`
	OutputTruncated bool            `json:"output_truncated"`
	TimedOut        bool            `json:"timed_out"`
	SandboxID       string          `json:"sandbox_id"`
	ToolCalls       []jsonToolCall  `json:"tool_calls"`
	// Warnings are the daemon's, such as a disk quota the tenant is over.
	Warnings []string `json:"warnings,omitempty"`
	// Attachments are what the program showed (cexec.show).
	Attachments []jsonAttachment `json:"attachments,omitempty"`
}

type jsonError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

type jsonToolCall struct {
	Server     string  `json:"server"`
	Tool       string  `json:"tool"`
	DurationMS float64 `json:"duration_ms"`
	OK         bool    `json:"ok"`
	Error      string  `json:"error,omitempty"`
}

func run(cmd *cobra.Command, env *cli.Env, c *client.Client, req *cexecv1.ExecRequest, p *prompter, saveDir string) error {
	var out jsonResult
	var res *cexecv1.ExecResult
	events := c.Exec(cmd.Context(), req)
	if p != nil {
		events = c.ExecInteractive(cmd.Context(), req, p.ask)
	}
	seen := false
	for ev, err := range events {
		if err != nil && !seen && p != nil && status.Code(err) == codes.Unimplemented {
			// A daemon without the Interactive service: run without asking.
			return run(cmd, env, c, req, nil, saveDir)
		}
		if err != nil {
			return err
		}
		seen = true
		switch e := ev.GetEvent().(type) {
		case *cexecv1.ExecEvent_Output:
			w := env.Stdout
			if e.Output.GetStream() == "stderr" {
				w = env.Stderr
			}
			if env.JSON {
				if e.Output.GetStream() == "stderr" {
					out.Stderr += string(e.Output.GetData())
				} else {
					out.Stdout += string(e.Output.GetData())
				}
				continue
			}
			if _, err := w.Write(e.Output.GetData()); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		case *cexecv1.ExecEvent_Result:
			res = e.Result
		}
	}
	if res == nil {
		return errors.New("exec: the daemon ended the stream without a result")
	}
	var atts *[]jsonAttachment
	if env.JSON {
		atts = &out.Attachments
	}
	if err := reportAttachments(env.Stderr, saveDir, res.GetAttachments(), atts); err != nil {
		return err
	}
	if env.JSON {
		fill(&out, res)
		if err := env.PrintJSON(out); err != nil {
			return err
		}
	} else if e := res.GetError(); e != nil {
		switch {
		case e.GetTraceback() != "":
			fmt.Fprint(env.Stderr, e.GetTraceback())
		default:
			fmt.Fprintf(env.Stderr, "%s: %s\n", e.GetType(), e.GetMessage())
		}
	}
	if !env.JSON && res.GetOutputTruncated() {
		fmt.Fprintln(env.Stderr, "cexecctl: output was truncated at the sandbox's output limit")
	}
	if !env.JSON {
		for _, w := range res.GetWarnings() {
			fmt.Fprintln(env.Stderr, "cexecctl:", w)
		}
	}
	if code := int(res.GetExitCode()); code != 0 {
		return &cli.ExitError{Code: code}
	}
	return nil
}

func fill(out *jsonResult, r *cexecv1.ExecResult) {
	out.ExitCode = r.GetExitCode()
	out.Warnings = r.GetWarnings()
	if len(r.GetResultJson()) > 0 {
		out.Result = r.GetResultJson()
	}
	if e := r.GetError(); e != nil {
		out.Error = &jsonError{Type: e.GetType(), Message: e.GetMessage(), Traceback: e.GetTraceback()}
	}
	out.DurationMS = float64(r.GetDurationUs()) / 1000
	out.CPUMS = r.GetCpuMs()
	out.MaxRSSBytes = r.GetMaxRssBytes()
	out.OutputTruncated = r.GetOutputTruncated()
	out.TimedOut = r.GetTimedOut()
	out.SandboxID = r.GetSandboxId()
	out.ToolCalls = []jsonToolCall{}
	for _, tc := range r.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, jsonToolCall{
			Server: tc.GetServer(), Tool: tc.GetTool(), DurationMS: float64(tc.GetDurationUs()) / 1000,
			OK: tc.GetOk(), Error: tc.GetError(),
		})
	}
}
