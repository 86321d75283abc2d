package main

import (
	"strings"
	"testing"
)

func TestUnclear(t *testing.T) {
	tests := []struct {
		msg, want string
	}{
		{"", "empty"},
		{"EOF", "a bare transport error"},
		{"execute_code: unexpected EOF", "a bare transport error"},
		{"execute_code: rpc error: code = Unavailable desc = error reading from server: EOF", "a raw gRPC status"},
		{"execute_code: context canceled", "a bare transport error"},
		{"execute_code: run in sandbox sbx-1: plugin sandbox.bwrap exited during the call (it is being restarted): error reading from server: EOF", ""},
		{"ToolError: call everything/echo: connection to server lost (server everything went away during the call and is being restarted): transport error: transport closed", ""},
		{"cexec withheld this output because the PII tokenizer failed; try again, and tell the operator if it persists", ""},
	}
	for _, tt := range tests {
		if got := unclear(tt.msg); got != tt.want {
			t.Errorf("unclear(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

func TestErrorKind(t *testing.T) {
	a := errorKind("execute_code: run in sandbox sbx-soak-03-1a2b3c4d5e6f: sandbox \"sbx-soak-03-1a2b3c4d5e6f\": not found\ntraceback")
	b := errorKind("execute_code: run in sandbox sbx-soak-11-99aa88bb77cc: sandbox \"sbx-soak-11-99aa88bb77cc\": not found")
	if a != b {
		t.Errorf("the same failure counts as two kinds:\n%s\n%s", a, b)
	}
	if got := errorKind("ToolError: [EMAIL_12] is unknown"); got != "ToolError: [TOKEN] is unknown" {
		t.Errorf("tokens are not folded: %q", got)
	}
}

func TestRawPII(t *testing.T) {
	j := newJob(1234, 20)
	tests := []struct {
		name, text string
		want       int
	}{
		{"tokenized", "Echo: contact [EMAIL_1]\nphone [PHONE_1]\nsaved 1234\n", 0},
		{"raw email", "Echo: contact " + j.email, 2},
		{"raw phone", "phone " + j.phone, 1},
		{"phone digits", "call " + strings.NewReplacer("+", "", " ", "", "-", "").Replace(j.phone), 2},
		{"local part before a cut", strings.Split(j.email, "@")[0] + "@[…]", 1},
	}
	for _, tt := range tests {
		if got := j.rawPII(tt.text); len(got) != tt.want {
			t.Errorf("%s: rawPII = %q, want %d values", tt.name, got, tt.want)
		}
	}
}

func TestProgramHoldsNoPII(t *testing.T) {
	j := newJob(42, 3)
	if got := j.rawPII(j.program()); len(got) != 0 {
		t.Errorf("the program sent to the model holds %q:\n%s", got, j.program())
	}
}
