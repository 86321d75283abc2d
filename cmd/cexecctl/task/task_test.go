package task

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

func TestShow(t *testing.T) {
	tests := []struct {
		name       string
		res        *cexecv1.ExecuteTaskResponse
		wantOut    string
		wantErr    []string
		wantStatus int
	}{
		{
			name:    "ok",
			res:     &cexecv1.ExecuteTaskResponse{Status: "ok", Stdout: "14\n", Result: &cexecv1.ExecResult{}},
			wantOut: "14\n",
		},
		{
			name:    "ok with only a result",
			res:     &cexecv1.ExecuteTaskResponse{Status: "ok", Result: &cexecv1.ExecResult{ResultJson: []byte(`{"n":3}`)}},
			wantOut: "{\"n\":3}\n",
		},
		{
			name: "failed after repairs",
			res: &cexecv1.ExecuteTaskResponse{Status: "failed", Stdout: "partial\n", Repairs: 2, Result: &cexecv1.ExecResult{
				ExitCode: 1, Error: &cexecv1.ExecError{Type: "KeyError", Message: "'x'", Traceback: "Traceback ...\nKeyError: 'x'\n"}}},
			wantOut: "partial\n", wantErr: []string{"KeyError: 'x'", "still failed after 2 repair(s)"}, wantStatus: 1,
		},
		{
			name:    "timed out",
			res:     &cexecv1.ExecuteTaskResponse{Status: "failed", Result: &cexecv1.ExecResult{TimedOut: true}},
			wantErr: []string{"the program timed out"}, wantStatus: 1,
		},
		{
			name:    "exit status",
			res:     &cexecv1.ExecuteTaskResponse{Status: "failed", Result: &cexecv1.ExecResult{ExitCode: 3}},
			wantErr: []string{"exited with status 3"}, wantStatus: 3,
		},
		{
			name: "no code",
			res: &cexecv1.ExecuteTaskResponse{Status: "no_code", Diagnostics: []*cexecv1.Diagnostic{
				{Severity: "warning", Summary: "tool search failed"},
				{Severity: "error", Summary: "codegen rules", Detail: "wrote no program: no rule matches the task"}}},
			wantErr: []string{"no generator wrote a program", "error: codegen rules: wrote no program: no rule matches the task"}, wantStatus: 1,
		},
		{
			name: "denied",
			res: &cexecv1.ExecuteTaskResponse{Status: "denied", Diagnostics: []*cexecv1.Diagnostic{
				{Severity: "error", Summary: "the guard layer refused the program", Detail: "guard pii: no_forgetting"}}},
			wantErr: []string{"a guard denied the program", "guard pii: no_forgetting"}, wantStatus: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := show(&out, &errOut, tt.res, false); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.wantOut {
				t.Errorf("stdout %q, want %q", out.String(), tt.wantOut)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
			if strings.Contains(errOut.String(), "tool search failed") {
				t.Errorf("warnings belong to -v:\n%s", errOut.String())
			}
			err := exitFor(tt.res)
			var ee *cli.ExitError
			switch {
			case tt.wantStatus == 0 && err != nil:
				t.Errorf("exit error %v", err)
			case tt.wantStatus != 0 && (!errors.As(err, &ee) || ee.Code != tt.wantStatus):
				t.Errorf("exit %v, want status %d", err, tt.wantStatus)
			}
		})
	}
}

func TestVerbose(t *testing.T) {
	res := &cexecv1.ExecuteTaskResponse{
		Status: "ok", Stdout: "3\n", Generator: "llm", Model: "gpt-x", Code: "print(3)\n", PromptTokens: 1600, CompletionTokens: 85,
		ToolsDiscovered: 23, ToolsSelected: 8, Repairs: 1, PipelineOverheadUs: 1500,
		Attempts: []*cexecv1.TaskAttempt{
			{Generator: "llm", Round: 0, Tools: 8, Code: "print(r['lines'])", Error: "Traceback (most recent call last):\n  File ...\nKeyError: 'lines'", GenerateUs: 900000},
			{Generator: "llm", Round: 1, Tools: 8, Code: "print(3)\n", GenerateUs: 800000},
		},
		Timings:     &cexecv1.TaskTimings{SearchUs: 700, GenerateUs: 1700000, GuardUs: 600, ExecuteUs: 40000, TotalUs: 1741500},
		Result:      &cexecv1.ExecResult{Session: "s1"},
		Diagnostics: []*cexecv1.Diagnostic{{Severity: "warning", Summary: "tool search failed", Detail: "selector restarting"}},
	}
	var out, errOut bytes.Buffer
	if err := show(&out, &errOut, res, true); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"generator  llm (gpt-x), 1600 prompt + 85 completion tokens",
		"tools      8 selected of 23 discovered",
		"status     ok after 2 attempt(s), 1 repair(s)",
		"1. round 0, llm, 8 selected tools, 900.0ms: KeyError: 'lines'",
		"2. round 1, llm, 8 selected tools, 800.0ms: ran",
		"pipeline overhead 1.5ms",
		"session    s1",
		"warning: tool search failed: selector restarting",
		"program:\nprint(3)\n",
	} {
		if !strings.Contains(errOut.String(), w) {
			t.Errorf("-v lacks %q:\n%s", w, errOut.String())
		}
	}
	if out.String() != "3\n" {
		t.Errorf("stdout %q", out.String())
	}
}

func TestSummarise(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(100 - i)
	}
	s := summarise(v)
	if s != (Stats{P50: 50, P90: 90, P99: 99, Min: 1, Max: 100}) {
		t.Errorf("%+v", s)
	}
	if summarise(nil) != (Stats{}) {
		t.Error("empty input")
	}
}
