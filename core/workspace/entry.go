package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"
)

// Limits of one log entry. Long text is cut (Entry.Truncated says so) so
// that a line stays small enough to append in one write; a checkpoint
// context is data to resume from, so an oversized one is refused instead.
const (
	maxEntryText      = 64 << 10
	maxEntryList      = 1000
	MaxCheckpointSize = 1 << 20
	recentEntries     = 5
)

var kindRE = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// Entry is one line of a session log.
type Entry struct {
	// Seq numbers a session's entries from 1; Append sets it.
	Seq int64 `json:"seq"`
	// Time defaults to the time of the append.
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Task is the task description of execute_task, if any.
	Task string `json:"task,omitempty"`
	// Code is the program that ran.
	Code      string     `json:"code,omitempty"`
	Result    *Result    `json:"result,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// UpstreamLog holds what upstream servers logged during the tool calls.
	UpstreamLog []UpstreamLog `json:"upstream_log,omitempty"`
	Duration    Duration      `json:"duration_ms,omitempty"`
	// StateFiles are the state files the execution added, changed or
	// removed.
	StateFiles []string `json:"state_files,omitempty"`
	// Step and Context are a checkpoint's.
	Step    string          `json:"step,omitempty"`
	Context json.RawMessage `json:"context,omitempty"`
	// Skill names a skill saved during the session.
	Skill string `json:"skill,omitempty"`
	// Quota says that the tenant was at or over its disk quota when the
	// execution ended: why its writes failed (ENOSPC).
	Quota string `json:"quota,omitempty"`
	// Truncated is set when long text or lists were cut to fit the log.
	Truncated bool `json:"truncated,omitempty"`
	// Interpreter is the sandbox whose persistent interpreter ran the
	// execution, for one that kept the session's globals: where the next
	// one expects them (Tenant.SessionInterpreter).
	Interpreter string `json:"interpreter,omitempty"`
	// Warnings are what cexec told the execution's caller beside its
	// result: that the session's persistent interpreter had ended, and why.
	Warnings []string `json:"warnings,omitempty"`
}

// Result summarises how an execution ended.
type Result struct {
	OK        bool   `json:"ok"`
	ExitCode  int    `json:"exit_code,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Error     string `json:"error,omitempty"`
	// Output is what the program printed (as the agent saw it), cut to
	// 64 KiB.
	Output string `json:"output,omitempty"`
	// Value is what the program passed to cexec.result(); dropped when over
	// 64 KiB.
	Value    json.RawMessage `json:"value,omitempty"`
	TimedOut bool            `json:"timed_out,omitempty"`
}

// ToolCall records one upstream tool call of an execution.
type ToolCall struct {
	Server   string   `json:"server"`
	Tool     string   `json:"tool"`
	Duration Duration `json:"duration_ms"`
	OK       bool     `json:"ok"`
	Error    string   `json:"error,omitempty"`
	// Approval says how a call that needed approval was decided.
	Approval string `json:"approval,omitempty"`
}

// Duration is a time.Duration written to logs as (fractional) milliseconds,
// which people read more easily than nanoseconds.
type Duration time.Duration

// MarshalJSON writes milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%g", float64(d)/float64(time.Millisecond))), nil
}

// UnmarshalJSON reads milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

func marshalLine(e *Entry) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil // Encode ends with exactly one newline
}

// capEntry cuts an entry's text and lists to the log's limits.
func capEntry(e *Entry) {
	cut := func(s *string) {
		if len(*s) > maxEntryText {
			*s = cutText(*s, maxEntryText) + "…[truncated]"
			e.Truncated = true
		}
	}
	cut(&e.Task)
	cut(&e.Code)
	if r := e.Result; r != nil {
		rc := *r
		e.Result = &rc
		cut(&rc.Error)
		cut(&rc.Output)
		if len(rc.Value) > maxEntryText || (len(rc.Value) > 0 && !validJSON(rc.Value)) {
			rc.Value = nil
			e.Truncated = true
		}
	}
	if len(e.ToolCalls) > maxEntryList {
		e.ToolCalls = e.ToolCalls[:maxEntryList]
		e.Truncated = true
	}
	e.ToolCalls = slices.Clone(e.ToolCalls) // cut below without touching the caller's
	if len(e.StateFiles) > maxEntryList {
		e.StateFiles = e.StateFiles[:maxEntryList]
		e.Truncated = true
	}
	for i := range e.ToolCalls {
		if len(e.ToolCalls[i].Error) > 1024 {
			e.ToolCalls[i].Error = cutText(e.ToolCalls[i].Error, 1024) + "…"
			e.Truncated = true
		}
	}
}

// cutText shortens s to at most n bytes without splitting a UTF-8 sequence.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
