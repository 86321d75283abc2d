package cli

import (
	"errors"
	"fmt"
	"testing"

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
