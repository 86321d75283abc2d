package mcpface

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ExecOutput is execute_code's (and execute_task's) structuredContent. The
// text content says the same for clients that only read text.
type ExecOutput struct {
	OK     bool   `json:"ok"`
	Stdout string `json:"stdout"`
	// StdoutTruncated is set when stdout was cut, by the sandbox's limit or
	// by the face's cap (the middle is cut; head and tail are kept).
	StdoutTruncated bool            `json:"stdout_truncated,omitempty"`
	Stderr          string          `json:"stderr,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	// ResultOmitted is set when the result was too large to return.
	ResultOmitted bool       `json:"result_omitted,omitempty"`
	Error         *ExecError `json:"error,omitempty"`
	// ExitCode is set when the program exited with a non-zero status.
	ExitCode   int       `json:"exit_code,omitempty"`
	TimedOut   bool      `json:"timed_out,omitempty"`
	ToolCalls  ToolCalls `json:"tool_calls"`
	DurationMS float64   `json:"duration_ms"`
	Session    string    `json:"session"`
	// Code and Attempts are execute_task's: the program that ran last.
	Code     string `json:"code,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
}

// capMiddle cuts s to at most max bytes (plus a marker) by dropping its
// middle (the end of a program's output often holds its summary). It reports
// whether it cut. Cuts fall between lines, or between words when a line is
// longer than the budget, never inside a word: the reply is tokenized after
// this, and half a value (an e-mail address cut at the "@") would no longer
// be recognised as PII.
func capMiddle(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	head, start := max*3/4, len(s)-max/4
	if i := strings.LastIndexByte(s[:head], '\n'); i >= 0 {
		head = i + 1
	} else {
		head = strings.LastIndexFunc(s[:head], unicode.IsSpace) + 1
	}
	if i := strings.IndexByte(s[start:], '\n'); i >= 0 {
		start += i + 1
	} else if i := strings.IndexFunc(s[start:], unicode.IsSpace); i >= 0 {
		start += i + 1
	} else {
		start = len(s)
	}
	return s[:head] + fmt.Sprintf("\n[… %d bytes cut …]\n", start-head) + s[start:], true
}

// capTail keeps the last max bytes of s: the end of a traceback names the
// error.
func capTail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	start := len(s) - max
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return "[…]\n" + s[start:]
}

func ms(d time.Duration) float64 {
	return float64(d.Round(10*time.Microsecond)) / float64(time.Millisecond)
}

// executionReply renders an execution for the agent: stdout first, then
// what else there is, each part capped, and a last line with the outcome.
func (f *Face) executionReply(ex Execution, session string, task *TaskResult) reply {
	max := f.o.MaxOutput
	out := ExecOutput{
		OK:         ex.Error == nil && !ex.TimedOut && ex.ExitCode == 0,
		Error:      ex.Error,
		ExitCode:   ex.ExitCode,
		TimedOut:   ex.TimedOut,
		ToolCalls:  ex.Calls,
		DurationMS: ms(ex.Duration),
		Session:    session,
	}
	var b strings.Builder
	if task != nil {
		code, _ := capMiddle(task.Code, max)
		out.Code, out.Attempts = code, task.Attempts
		fmt.Fprintf(&b, "[program, attempt %d]\n```python\n%s\n```\n", task.Attempts, strings.TrimRight(code, "\n"))
	}

	stdout, cut := capMiddle(ex.Stdout, max)
	out.Stdout, out.StdoutTruncated = stdout, cut || ex.OutputTruncated
	if stdout != "" {
		b.WriteString(stdout)
		if !strings.HasSuffix(stdout, "\n") {
			b.WriteByte('\n')
		}
	}
	switch {
	case cut:
		fmt.Fprintf(&b, "[stdout truncated: %d bytes, middle cut to fit %d; print less, e.g. counts or the first rows]\n", len(ex.Stdout), max)
	case ex.OutputTruncated:
		b.WriteString("[output truncated at the sandbox's output limit; print less]\n")
	}
	if ex.Stderr != "" {
		stderr, _ := capMiddle(ex.Stderr, max/4)
		out.Stderr = stderr
		b.WriteString("[stderr]\n" + stderr)
		if !strings.HasSuffix(stderr, "\n") {
			b.WriteByte('\n')
		}
	}
	if len(ex.Result) > 0 {
		if len(ex.Result) > max {
			out.ResultOmitted = true
			fmt.Fprintf(&b, "[result omitted: %d bytes of JSON; return less]\n", len(ex.Result))
		} else {
			out.Result = ex.Result
			b.WriteString("[result] ")
			b.Write(ex.Result)
			b.WriteByte('\n')
		}
	}
	if e := ex.Error; e != nil {
		errCopy := *e
		errCopy.Traceback = capTail(e.Traceback, max/4)
		out.Error = &errCopy
		fmt.Fprintf(&b, "[error] %s: %s\n", e.Type, e.Message)
		if tb := strings.TrimRight(errCopy.Traceback, "\n"); tb != "" {
			b.WriteString(tb + "\n")
		}
	}
	if ex.Stdout == "" && ex.Stderr == "" && len(ex.Result) == 0 && ex.Error == nil {
		b.WriteString("(no output: print what you need)\n")
	}
	if c := ex.Calls; c.Calls > 0 || c.Refused > 0 {
		b.WriteString(callSummary(c))
	}
	status := "ok"
	switch {
	case ex.TimedOut:
		status = "timed out"
	case ex.Error != nil:
		status = "failed"
	case ex.ExitCode != 0:
		status = fmt.Sprintf("exited with code %d", ex.ExitCode)
	}
	fmt.Fprintf(&b, "[%s in %s]", status, formatMS(out.DurationMS))
	return reply{text: b.String(), structured: out, isError: !out.OK, tokenized: ex.Tokenized}
}

// callSummary is one line: how many calls, to what, and what failed.
func callSummary(c ToolCalls) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d tool call%s, %s", c.Calls, plural(c.Calls), formatMS(c.TotalMS))
	if c.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", c.Failed)
	}
	if c.Refused > 0 {
		fmt.Fprintf(&b, ", %d refused by the call limit", c.Refused)
	}
	for i, t := range c.Tools {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s/%s ×%d", t.Server, t.Tool, t.Calls)
		if t.Failed > 0 {
			fmt.Fprintf(&b, " (%d failed: %s)", t.Failed, cutRunes(t.LastError, 200))
		}
	}
	b.WriteString("]\n")
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func formatMS(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}
