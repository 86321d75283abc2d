package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestTaskRepair(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.runner.results = []*CodeResult{raised("KeyError", "'content'"), ok("42\n")}
	g := f.gen("llm", func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		src := "print(r['content'])"
		if req.Previous != nil {
			src = "print(r.get('text'))"
		}
		return codegen.GenerateResponse{Code: src, Model: "m", Usage: codegen.Usage{PromptTokens: 10, CompletionTokens: 5}}, nil
	})
	res := f.run(t, "answer")
	if res.Status != TaskOK || res.Repairs != 1 || len(res.Attempts) != 2 || res.Code != "print(r.get('text'))" {
		t.Fatalf("status %s repairs %d attempts %+v", res.Status, res.Repairs, res.Attempts)
	}
	prev := g.requests()[1].Previous
	if prev == nil || prev.Code != "print(r['content'])" || !strings.Contains(prev.Error, "KeyError: 'content'") || !strings.Contains(prev.Error, "Traceback") {
		t.Errorf("repair request's previous attempt: %+v", prev)
	}
	if !strings.Contains(res.Attempts[0].Error, "KeyError") || res.Attempts[1].Round != 1 {
		t.Errorf("attempts %+v", res.Attempts)
	}
	if res.Session == "" || f.runner.reqs[0].Session != res.Session || f.runner.reqs[1].Session != res.Session {
		t.Errorf("both executions should run in the task's session %q: %q, %q", res.Session, f.runner.reqs[0].Session, f.runner.reqs[1].Session)
	}
	if res.Usage != (codegen.Usage{PromptTokens: 20, CompletionTokens: 10}) {
		t.Errorf("usage %+v", res.Usage)
	}
}

func TestTaskRepairStops(t *testing.T) {
	tests := []struct {
		name       string
		maxRepairs int
		result     *CodeResult
		// same makes the generator return the same program every time.
		same      bool
		wantExecs int
		wantDiag  string
	}{
		{name: "max_repairs reached", maxRepairs: 2, result: raised("ValueError", "bad"), wantExecs: 3},
		{name: "no repairs configured", maxRepairs: 0, result: raised("ValueError", "bad"), wantExecs: 1},
		{name: "the same program again", maxRepairs: 2, result: raised("ValueError", "bad"), same: true, wantExecs: 1,
			wantDiag: "no generator wrote a different program"},
		{name: "timeout", maxRepairs: 2, result: &CodeResult{ExecResult: sandbox.ExecResult{TimedOut: true,
			Error: &sandbox.ExecError{Type: "Timeout", Message: "30s"}}}, wantExecs: 1},
		{name: "exit status", maxRepairs: 2, result: &CodeResult{ExecResult: sandbox.ExecResult{ExitCode: 3}}, wantExecs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, workspace.Quota{})
			f.tasks.Config.MaxRepairs = tt.maxRepairs
			f.runner.results = []*CodeResult{tt.result}
			n := 0
			f.gen("g", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				n++
				if tt.same {
					n = 1
				}
				return codegen.GenerateResponse{Code: fmt.Sprintf("print(%d)", n)}, nil
			})
			res := f.run(t, "answer")
			if res.Status != TaskFailed || len(f.runner.reqs) != tt.wantExecs || res.Repairs != tt.wantExecs-1 {
				t.Fatalf("status %s, %d executions, %d repairs; want failed, %d", res.Status, len(f.runner.reqs), res.Repairs, tt.wantExecs)
			}
			if res.Exec == nil || res.Attempts[0].Error == "" {
				t.Errorf("the failure should be in the result: %+v", res.Attempts)
			}
			if tt.wantDiag != "" && !strings.Contains(res.Diagnostics.Error(), tt.wantDiag) {
				t.Errorf("diagnostics %v, want %q", res.Diagnostics, tt.wantDiag)
			}
		})
	}
}

func TestTaskDenied(t *testing.T) {
	refused := &CodeResult{ExecResult: sandbox.ExecResult{ExitCode: 1, SandboxOK: true, Error: &sandbox.ExecError{
		Type: TypeDenied, Message: "the code was not run: guard pii: no_writes: writes need a human"}}}
	// A PermissionError raised while the program ran (a refused tool call,
	// a read-only file) is the program's failure: it came from a sandbox.
	raisedInside := raised(TypeDenied, "tool filesystem/write_file is not allowed")
	raisedInside.SandboxID = "sbx-1"
	tests := []struct {
		name       string
		result     *CodeResult
		wantStatus string
		wantExecs  int
	}{
		{name: "refused before running", result: refused, wantStatus: TaskDenied, wantExecs: 1},
		{name: "raised while running", result: raisedInside, wantStatus: TaskFailed, wantExecs: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, workspace.Quota{})
			f.runner.results = []*CodeResult{tt.result}
			n := 0
			f.gen("g", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				n++
				return codegen.GenerateResponse{Code: fmt.Sprintf("write_file(path='%d')", n)}, nil
			})
			res := f.run(t, "go")
			if res.Status != tt.wantStatus || len(f.runner.reqs) != tt.wantExecs {
				t.Fatalf("status %s after %d executions, want %s after %d", res.Status, len(f.runner.reqs), tt.wantStatus, tt.wantExecs)
			}
			if tt.wantStatus != TaskDenied {
				return
			}
			if got := res.Diagnostics.Error(); got != "the guard layer refused the program: the code was not run: guard pii: no_writes: writes need a human" {
				t.Errorf("diagnostics %q", got)
			}
			if !strings.HasPrefix(res.Attempts[0].Error, "denied: the code was not run") || res.Repairs != 0 {
				t.Errorf("attempt %+v", res.Attempts[0])
			}
		})
	}
}

// TestTaskPII runs under a real guard layer: the generators see the task
// tokenized, the executions are model-facing, and the operator gets the
// answer restored while a model-facing caller keeps the tokens.
func TestTaskPII(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: emailGuard{}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	f.tasks.Guard = gr
	// What a model-facing execution returns: the program printed the
	// address, the executor tokenized it.
	f.runner.results = []*CodeResult{{Stdout: []byte("remembered: [EMAIL_1] is Bob's address\n"), Tokenized: true,
		ExecResult: sandbox.ExecResult{SandboxOK: true}}}
	g := f.gen("llm", func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		name := strings.Fields(req.Task)[2]
		return codegen.GenerateResponse{Code: fmt.Sprintf("remember(%q)", name), Usage: codegen.Usage{PromptTokens: 1}}, nil
	})
	for _, modelFacing := range []bool{false, true} {
		t.Run(fmt.Sprintf("model facing %v", modelFacing), func(t *testing.T) {
			res, err := f.tasks.ExecuteTask(context.Background(), TaskRequest{Tenant: "acme", ModelFacing: modelFacing,
				Task: "remember that bob@example.com is Bob's address"})
			if err != nil {
				t.Fatal(err)
			}
			reqs := g.requests()
			if got := reqs[len(reqs)-1].Task; got != "remember that [EMAIL_1] is Bob's address" {
				t.Errorf("the generator saw %q", got)
			}
			run := f.runner.reqs[len(f.runner.reqs)-1]
			if !run.ModelFacing || run.Code != `remember("[EMAIL_1]")` || run.Session != res.Session || run.Task != "remember that [EMAIL_1] is Bob's address" {
				t.Errorf("execution request %+v", run)
			}
			wantOut, wantCode := "remembered: bob@example.com is Bob's address\n", `remember("bob@example.com")`
			if modelFacing {
				wantOut, wantCode = "remembered: [EMAIL_1] is Bob's address\n", `remember("[EMAIL_1]")`
			}
			if string(res.Exec.Stdout) != wantOut || res.Code != wantCode || res.Attempts[0].Code != wantCode {
				t.Errorf("stdout %q, code %q; want %q, %q", res.Exec.Stdout, res.Code, wantOut, wantCode)
			}
			if res.Timings.Guard <= 0 {
				t.Errorf("guard time %s", res.Timings.Guard)
			}
		})
	}
}
