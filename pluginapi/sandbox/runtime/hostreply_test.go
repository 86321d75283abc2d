package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestHostReply words host call outcomes as both the relayed path and the
// host socket send them, so that a program sees the same either way.
func TestHostReply(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", MaxCallData) + `"`)
	tests := []struct {
		name     string
		method   string
		result   json.RawMessage
		err      error
		wantType string
		wantRes  string
	}{
		{name: "result", method: "call_tool", result: json.RawMessage(`{"a":1}`), wantRes: `{"a":1}`},
		{name: "no result", method: "state_get", wantRes: "null"},
		{name: "typed error", method: "call_tool", err: &sandbox.CallError{Type: "ValueError", Message: "m"}, wantType: "ValueError"},
		{name: "untyped error of a tool call", method: "call_tool", err: &sandbox.CallError{Message: "m"}, wantType: "ToolError"},
		{name: "plain error of a tool call", method: "call_tool", err: errors.New("m"), wantType: "ToolError"},
		{name: "plain error of another call", method: "state_get", err: errors.New("m"), wantType: sandbox.DefaultCallErrorType},
		{name: "too large", method: "call_tool", result: big, wantType: "ResultTooLarge"},
		{name: "not JSON", method: "call_tool", result: json.RawMessage(`{`), wantType: sandbox.DefaultCallErrorType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := &recHost{fn: func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return tt.result, tt.err }}
			rep := hostReply(t.Context(), host, &inMsg{Op: "call", ID: json.RawMessage("7"), Method: tt.method})
			if rep.ErrorType != tt.wantType || string(rep.Result) != tt.wantRes || string(rep.ID) != "7" {
				t.Errorf("reply %+v, want type %q result %q", rep, tt.wantType, tt.wantRes)
			}
		})
	}
}
