package control

import (
	"time"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/workspace"
)

// Session logs cross the control API as proto messages; these convert the
// workspace's types.

func sessionProto(i workspace.SessionInfo) *cexecv1.SessionInfo {
	return &cexecv1.SessionInfo{
		Id:             i.ID,
		Entries:        i.Entries,
		StartedUnixMs:  i.Created.UnixMilli(),
		LastUnixMs:     i.LastActivity.UnixMilli(),
		LastCheckpoint: i.LastStep,
		Executions:     i.Executions,
		Failures:       i.Failures,
		Checkpoints:    i.Checkpoints,
		LastTask:       i.LastTask,
		LogBytes:       i.LogBytes,
		BadLines:       i.BadLines,
		StateFiles:     i.StateFiles,
	}
}

func entriesProto(es []workspace.Entry) []*cexecv1.SessionEntry {
	out := make([]*cexecv1.SessionEntry, 0, len(es))
	for i := range es {
		out = append(out, entryProto(&es[i]))
	}
	return out
}

func entryProto(e *workspace.Entry) *cexecv1.SessionEntry {
	out := &cexecv1.SessionEntry{
		Seq:         e.Seq,
		TimeUnixMs:  e.Time.UnixMilli(),
		Kind:        e.Kind,
		Task:        e.Task,
		Code:        e.Code,
		DurationMs:  durationMs(e.Duration),
		StateFiles:  e.StateFiles,
		Step:        e.Step,
		ContextJson: e.Context,
		Skill:       e.Skill,
		Truncated:   e.Truncated,
		Interpreter: e.Interpreter,
		Warnings:    e.Warnings,
	}
	if r := e.Result; r != nil {
		out.Result = &cexecv1.SessionResult{Ok: r.OK, ExitCode: int32(r.ExitCode), ErrorType: r.ErrorType, Error: r.Error,
			Output: r.Output, ValueJson: r.Value, TimedOut: r.TimedOut}
	}
	for _, tc := range e.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, &cexecv1.SessionToolCall{Server: tc.Server, Tool: tc.Tool,
			DurationMs: durationMs(tc.Duration), Ok: tc.OK, Error: tc.Error, Approval: tc.Approval})
	}
	for _, l := range e.UpstreamLog {
		out.UpstreamLog = append(out.UpstreamLog, &cexecv1.SessionUpstreamLog{Server: l.Server, Level: l.Level, Logger: l.Logger,
			DataJson: l.Data, Truncated: l.Truncated, Withheld: l.Withheld})
	}
	return out
}

func durationMs(d workspace.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}
