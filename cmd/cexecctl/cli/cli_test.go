package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"ok", nil, ExitOK},
		{"failure", errors.New("boom"), ExitFailure},
		{"usage", UsageErrorf("bad"), ExitUsage},
		{"not running", fmt.Errorf("status: %w", &client.NotRunningError{Socket: "/s", Err: errors.New("x")}), ExitNotRunning},
		{"explicit", &ExitError{Code: 7}, 7},
		{"unknown command", errors.New(`unknown command "frob" for "cexecctl"`), ExitUsage},
		{"daemon refused", fmt.Errorf("get state: %w", status.Error(codes.NotFound, "state x.json: not found")), ExitFailure},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("%s: ExitCode = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestFormatDiagnostic(t *testing.T) {
	tests := []struct {
		d    *cexecv1.Diagnostic
		want string
	}{
		{&cexecv1.Diagnostic{Severity: "error", Summary: "Unsupported block type", Detail: "no", Filename: "/c/cexec.hcl", Line: 5, Column: 1},
			"/c/cexec.hcl:5:1: error: Unsupported block type: no"},
		{&cexecv1.Diagnostic{Severity: "warning", Summary: "optional plugin failed"}, "warning: optional plugin failed"},
	}
	for _, tt := range tests {
		if got := FormatDiagnostic(tt.d); got != tt.want {
			t.Errorf("FormatDiagnostic = %q, want %q", got, tt.want)
		}
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"not a status", errors.New("read program: no such file"), "read program: no such file"},
		{"bare name keeps not found",
			fmt.Errorf("get session: %w", status.Error(codes.NotFound, "session nope: not found")),
			"get session: session nope: not found"},
		{"a name is not prose",
			status.Error(codes.NotFound, "session no-such-session: not found"), "session no-such-session: not found"},
		{"unknown tenant",
			status.Error(codes.NotFound, "no tenant beta: not in cexec.hcl and never used: not found"),
			"no tenant beta: not in cexec.hcl and never used"},
		{"not found already said",
			fmt.Errorf("get workflow: %w", status.Error(codes.NotFound, "tenant acme has no workflow w: not found")),
			"get workflow: tenant acme has no workflow w"},
		{"resource exhausted already said",
			fmt.Errorf("put state: %w", status.Error(codes.ResourceExhausted, "tenant acme: disk quota exceeded: resource exhausted")),
			"put state: tenant acme: disk quota exceeded"},
		{"invalid argument already said",
			fmt.Errorf("put state: %w", status.Error(codes.InvalidArgument, `invalid state name "../x": use 1-128 characters: invalid argument`)),
			`put state: invalid state name "../x": use 1-128 characters`},
		{"invalid argument not said", status.Error(codes.InvalidArgument, "state x: invalid argument"), "state x: invalid argument"},
		{"suffix of another code stays",
			status.Error(codes.Unknown, "runner failure: not found"), "runner failure: not found"},
		{"canceled", fmt.Errorf("exec: %w", status.Error(codes.Canceled, "context canceled")), "exec: context canceled"},
		{"no description", status.Error(codes.ResourceExhausted, ""), "resource exhausted"},
		{"exit error", &ExitError{Code: ExitFailure, Err: fmt.Errorf("list: %w", status.Error(codes.Internal, "disk on fire"))}, "list: disk on fire"},
	}
	for _, tt := range tests {
		if got := Message(tt.err); got != tt.want {
			t.Errorf("%s: Message = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTimeoutMs(t *testing.T) {
	tests := []struct {
		args  []string
		want  int64
		usage bool
	}{
		{nil, 0, false},
		{[]string{"--timeout", "90s"}, 90000, false},
		{[]string{"--timeout", "1ms"}, 1, false},
		{[]string{"--timeout", "0s"}, 0, true},
		{[]string{"--timeout", "-1s"}, 0, true},
		{[]string{"--timeout", "500us"}, 0, true},
	}
	for _, tt := range tests {
		fl := pflag.NewFlagSet("exec", pflag.ContinueOnError)
		fl.Duration("timeout", 0, "")
		if err := fl.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		got, err := TimeoutMs(fl, "timeout")
		if (ExitCode(err) == ExitUsage) != tt.usage || (err == nil) == tt.usage || got != tt.want {
			t.Errorf("%v: TimeoutMs = %d, %v; want %d, usage error %v", tt.args, got, err, tt.want, tt.usage)
		}
	}
}
