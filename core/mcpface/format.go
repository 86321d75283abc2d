package mcpface

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ExecOutput is execute_code's (and execute_task's) structuredContent. It
// says what the text says, compactly: empty fields are left out and times
// are rounded.
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
	ExitCode int  `json:"exit_code,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`
	// ToolCalls is left out when the program made no tool call.
	ToolCalls  *ToolCalls `json:"tool_calls,omitempty"`
	DurationMS float64    `json:"duration_ms"`
	// Session is set only when the execution ran in another session than
	// the connection's (the session argument).
	Session string `json:"session,omitempty"`
	// Code is execute_task's program, when asked for; Attempts counts the
	// programs it generated.
	Code     string `json:"code,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	// Attachments describes the content returned beside the text (what
	// the program showed with cexec.show).
	Attachments []AttachmentInfo `json:"attachments,omitempty"`
	// Warnings are cexec's remarks on the execution (Execution.Warnings).
	Warnings []string `json:"warnings,omitempty"`
}

// cutMarker replaces what capMiddle drops.
func cutMarker(n int) string {
	return "…[cut " + groupThousands(n) + " characters]…"
}

func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// maxWord is the longest run without a space that capMiddle moves its cut
// around: longer ones (a line of one character repeated, base64) are cut
// inside, keeping their head and tail, rather than dropped whole.
const maxWord = 256

// capMiddle cuts s to at most max bytes (plus a marker) by dropping its
// middle (the end of a program's output often holds its summary). It reports
// whether it cut. Each cut moves to a line break when one is near (within an
// eighth of max), else to a space, never inside a word shorter than maxWord:
// the reply is tokenized after this, and half a value (an e-mail address cut
// at the "@") would no longer be recognised as PII. A longer word is cut
// inside, so that no line is dropped whole.
func capMiddle(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	near := max / 8
	head, start := max*3/4, len(s)-max/4
	if i := strings.LastIndexByte(s[:head], '\n'); i >= 0 && head-i <= near {
		head = i + 1
	} else if j := wordStart(s, head); j >= 0 {
		head = j
	} else {
		for head > 0 && !utf8.RuneStart(s[head]) {
			head--
		}
	}
	atLine := true
	if i := strings.IndexByte(s[start:], '\n'); i >= 0 && i < near {
		start += i + 1
	} else if j := wordEnd(s, start); j >= 0 {
		start, atLine = j, false
	} else if j := wordStart(s, start); j > head {
		start, atLine = j, false
	} else {
		for start < len(s) && !utf8.RuneStart(s[start]) {
			start++
		}
		atLine = false
	}
	marker := cutMarker(utf8.RuneCountInString(s[head:start]))
	if atLine {
		marker += "\n"
	}
	return s[:head] + marker + s[start:], true
}

// wordStart is the start of the word s[i] is in, if it began within
// maxWord bytes on the same line, else -1.
func wordStart(s string, i int) int {
	j := strings.LastIndexFunc(s[max(i-maxWord, 0):i], unicode.IsSpace)
	if j < 0 && i > maxWord {
		return -1
	}
	return max(i-maxWord, 0) + j + 1
}

// wordEnd is the end of the word s[i] is in (after the space that ends
// it), if that is within maxWord bytes on the same line, else -1.
func wordEnd(s string, i int) int {
	seg := s[i:min(i+maxWord, len(s))]
	if nl := strings.IndexByte(seg, '\n'); nl >= 0 {
		seg = seg[:nl]
	}
	j := strings.IndexAny(seg, " \t")
	if j < 0 {
		return -1
	}
	return i + j + 1
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

// ms rounds a duration to what a reader compares: 0.1 ms below 10 ms,
// whole milliseconds above.
func ms(d time.Duration) float64 {
	if d < 10*time.Millisecond {
		return float64(d.Round(100*time.Microsecond)) / float64(time.Millisecond)
	}
	return float64(d.Round(time.Millisecond) / time.Millisecond)
}

// roundMS rounds a figure in milliseconds as ms does.
func roundMS(v float64) float64 {
	return ms(time.Duration(v * float64(time.Millisecond)))
}

// executionReply renders an execution for the agent. A success is its
// output and nothing else ("(no output)" when there is none) but cexec's
// warnings, first; a failure adds
// what went wrong once (the traceback, whose last line names the error), the
// exit status and the tool calls that failed. session is the session to
// report: "" when it is the connection's own.
func (f *Face) executionReply(ex Execution, session string, task *TaskResult, showCode bool) reply {
	max := f.o.MaxOutput
	out := ExecOutput{
		OK:         ex.Error == nil && !ex.TimedOut && ex.ExitCode == 0,
		Error:      ex.Error,
		ExitCode:   ex.ExitCode,
		TimedOut:   ex.TimedOut,
		DurationMS: ms(ex.Duration),
		Session:    session,
		Warnings:   ex.Warnings,
	}
	if c := ex.Calls; c.Calls > 0 || c.Refused > 0 {
		out.ToolCalls = roundCalls(c)
	}
	var b strings.Builder
	if task != nil {
		out.Attempts = task.Attempts
		if showCode {
			code, _ := capMiddle(task.Code, max)
			out.Code = code
			fmt.Fprintf(&b, "```python\n%s\n```\n", strings.TrimRight(code, "\n"))
		}
	}

	// Said first: a warning explains what follows (a NameError, say).
	for _, w := range ex.Warnings {
		fmt.Fprintf(&b, "[cexec: %s]\n", w)
	}
	stdout, cut := capMiddle(ex.Stdout, max)
	out.Stdout, out.StdoutTruncated = stdout, cut || ex.OutputTruncated
	writeLine(&b, stdout)
	switch {
	case cut:
		fmt.Fprintf(&b, "[stdout cut from %d to %d bytes; print less]\n", len(ex.Stdout), max)
	case ex.OutputTruncated:
		b.WriteString("[stdout cut at the sandbox's output limit; print less]\n")
	}
	if ex.Stderr != "" {
		stderr, _ := capMiddle(ex.Stderr, max/4)
		out.Stderr = stderr
		b.WriteString("[stderr]\n")
		writeLine(&b, stderr)
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
		tb := strings.TrimRight(errCopy.Traceback, "\n")
		if tb == "" || !strings.Contains(tb, e.Message) {
			// The traceback's last line names the error; without one the
			// error is said here.
			fmt.Fprintf(&b, "%s: %s\n", e.Type, e.Message)
		}
		writeLine(&b, tb)
	}
	for i := range ex.Attachments {
		a := &ex.Attachments[i]
		out.Attachments = append(out.Attachments, a.info())
		b.WriteString(a.describe())
		b.WriteByte('\n')
	}
	if c := ex.Calls; c.Refused > 0 || c.Failed > 0 && !explained(c, ex.Error) {
		b.WriteString(callSummary(c, ex.Error))
	}
	switch {
	case ex.TimedOut:
		fmt.Fprintf(&b, "[timed out after %s and was stopped; do less per program]\n", formatMS(out.DurationMS))
	case ex.ExitCode != 0 && ex.Error == nil:
		fmt.Fprintf(&b, "[exited with code %d]\n", ex.ExitCode)
	case b.Len() == 0:
		b.WriteString("(no output)\n")
	}
	return reply{text: b.String(), structured: out, isError: !out.OK, tokenized: ex.Tokenized, attachments: ex.Attachments}
}

// writeLine writes s, ending it with a newline.
func writeLine(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

// roundCalls is c with its times rounded, for structuredContent.
func roundCalls(c ToolCalls) *ToolCalls {
	c.TotalMS = roundMS(c.TotalMS)
	c.Tools = slices.Clone(c.Tools)
	for i := range c.Tools {
		c.Tools[i].TotalMS = roundMS(c.Tools[i].TotalMS)
		c.Tools[i].MaxMS = roundMS(c.Tools[i].MaxMS)
	}
	return &c
}

// explained reports whether the program's error is the error of every
// tool call that failed: its traceback then says all there is to say.
func explained(c ToolCalls, progErr *ExecError) bool {
	if progErr == nil {
		return false
	}
	for _, t := range c.Tools {
		if t.Failed > 0 && (t.Failed > 1 || !strings.Contains(t.LastError, progErr.Message)) {
			return false
		}
	}
	return true
}

// callSummary is one line on the tool calls that failed or were refused;
// the last error of a tool is left out when it is the program's error,
// which the reply shows already.
func callSummary(c ToolCalls, progErr *ExecError) string {
	var b strings.Builder
	b.WriteByte('[')
	if c.Failed > 0 {
		fmt.Fprintf(&b, "%d of %d tool call%s failed", c.Failed, c.Calls, plural(c.Calls))
		if c.Refused > 0 {
			b.WriteString(", ")
		}
	}
	if c.Refused > 0 {
		fmt.Fprintf(&b, "%d tool call%s refused by the call limit", c.Refused, plural(c.Refused))
	}
	sep := ": "
	for _, t := range c.Tools {
		if t.Failed == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s%s/%s ×%d", sep, t.Server, t.Tool, t.Failed)
		sep = "; "
		if progErr == nil || !strings.Contains(t.LastError, progErr.Message) {
			fmt.Fprintf(&b, " (%s)", cutRunes(t.LastError, 200))
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
