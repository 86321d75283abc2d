package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

func TestTaskChain(t *testing.T) {
	usage := codegen.Usage{PromptTokens: 900, CompletionTokens: 40}
	tests := []struct {
		name string
		// first is the first generator of the chain; "second" always
		// answers with print(2).
		first         func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error)
		wantGenerator string
		wantAttempts  int
		wantFirstErr  string
		wantUsage     codegen.Usage
	}{
		{
			name:          "first answers",
			first:         code("print(1)"),
			wantGenerator: "first", wantAttempts: 1,
		},
		{
			name: "first fails",
			first: func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				return codegen.GenerateResponse{}, errors.New("status 500 after 3 retries")
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "generate: status 500 after 3 retries",
		},
		{
			name: "first, a model, writes no code: not asked again",
			first: func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				return codegen.GenerateResponse{Usage: usage, Model: "gpt", Diagnostics: pluginapi.Diagnostics{
					pluginapi.Errorf("", "the reply holds no program", "")}}, nil
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "wrote no program: the reply holds no program",
			wantUsage: usage,
		},
		{
			name: "first, a model whose request failed, writes no code: not asked again",
			first: func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				return codegen.GenerateResponse{Model: "gpt", Diagnostics: pluginapi.Diagnostics{
					pluginapi.Errorf("", "openai request failed", "status 500")}}, nil
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "wrote no program: openai request failed: status 500",
		},
		{
			name: "first, model-free, writes no code: asked again with every tool",
			first: func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				if len(req.Tools) < 7 {
					return codegen.GenerateResponse{Diagnostics: pluginapi.Diagnostics{pluginapi.Errorf("", "no matching rule could be used", "")}}, nil
				}
				return codegen.GenerateResponse{Code: "print(7)", Model: "rules/remember"}, nil
			},
			wantGenerator: "first", wantAttempts: 2, wantFirstErr: "wrote no program: no matching rule could be used",
		},
		{
			name: "first hangs past its deadline",
			first: func(ctx context.Context, _ codegen.GenerateRequest) (codegen.GenerateResponse, error) {
				<-ctx.Done()
				return codegen.GenerateResponse{}, ctx.Err()
			},
			wantGenerator: "second", wantAttempts: 2, wantFirstErr: "no answer within 50ms (the plugin's timeout)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, workspace.Quota{})
			f.tasks.Config.GenerateTimeouts = map[string]time.Duration{"first": 50 * time.Millisecond}
			f.gen("first", tt.first)
			f.gen("second", code("print(2)"))
			res := f.run(t, "do it")
			if res.Status != TaskOK || res.Generator != tt.wantGenerator || len(res.Attempts) != tt.wantAttempts {
				t.Fatalf("status %s, generator %s, %d attempts; want ok, %s, %d: %+v", res.Status, res.Generator, len(res.Attempts),
					tt.wantGenerator, tt.wantAttempts, res.Attempts)
			}
			if !strings.Contains(res.Attempts[0].Error, tt.wantFirstErr) {
				t.Errorf("first attempt error %q, want %q", res.Attempts[0].Error, tt.wantFirstErr)
			}
			if last := res.Attempts[len(res.Attempts)-1]; last.Error != "" || last.Code != res.Code {
				t.Errorf("last attempt %+v should hold the program that ran", last)
			}
			if res.Usage != tt.wantUsage {
				t.Errorf("usage %+v, want %+v", res.Usage, tt.wantUsage)
			}
			if got := string(res.Exec.Stdout); got != "done\n" {
				t.Errorf("stdout %q", got)
			}
			if len(f.runner.reqs) != 1 || f.runner.reqs[0].Code != res.Code || f.runner.reqs[0].Task != "do it" {
				t.Errorf("executions %+v", f.runner.reqs)
			}
		})
	}
}

func TestTaskNoCode(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.gen("llm", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		return codegen.GenerateResponse{}, errors.New("connection refused")
	})
	f.gen("rules", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		return codegen.GenerateResponse{Diagnostics: pluginapi.Diagnostics{pluginapi.Errorf("", "no rule matches the task", "23 rules tried")}}, nil
	})
	f.tasks.Config.Codegen = append(f.tasks.Config.Codegen, "gone")
	res := f.run(t, "compose a sonnet")
	if res.Status != TaskNoCode || res.Exec != nil || len(f.runner.reqs) != 0 {
		t.Fatalf("status %s", res.Status)
	}
	want := "codegen llm: generate: connection refused; " +
		"codegen rules: wrote no program: no rule matches the task: 23 rules tried; " +
		"codegen gone: plugin codegen.gone is failed (exit status 1): plugin is not running"
	if got := res.Diagnostics.Error(); got != want {
		t.Errorf("diagnostics\n got %q\nwant %q", got, want)
	}
	// llm, rules (selected), rules (fallback), gone.
	if len(res.Attempts) != 4 || !res.Attempts[2].Fallback {
		t.Errorf("attempts %+v", res.Attempts)
	}

	f.tasks.Config.Codegen = nil
	res = f.run(t, "anything")
	if res.Status != TaskNoCode || !strings.Contains(res.Diagnostics.Error(), "no code generator is configured") {
		t.Errorf("without generators: %s %v", res.Status, res.Diagnostics)
	}
}

func TestTaskInputs(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	tenant, err := f.ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.SaveSkill(context.Background(), "weekly_report", "Summarise the week's notes",
		"def run():\n    return 'report'\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tenant.WorkspaceDir(), "notes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tenant.WorkspaceDir(), "notes", "a.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.search.ids = []string{"skills/weekly_report", "fs/read_text_file", "skills/nope", "fs/gone", "fs/write_file", "fs/list_directory"}
	g := f.gen("g", code("print(1)"))
	f.run(t, "write the weekly report")
	req := g.requests()[0]
	if got := ids(req.Tools); !slices.Equal(got, []string{"fs/read_text_file", "fs/write_file"}) {
		t.Errorf("tools %v: want the first SearchLimit tools that exist", got)
	}
	if len(req.Skills) != 1 || req.Skills[0].Name != "weekly_report" || !strings.Contains(req.Skills[0].Source, "def run") {
		t.Errorf("skills %+v", req.Skills)
	}
	for _, want := range []string{"notes/", "notes/a.txt", "skills/weekly_report/__init__.py"} {
		if !slices.Contains(req.WorkspaceListing, want) {
			t.Errorf("workspace listing %v lacks %s", req.WorkspaceListing, want)
		}
	}
	if req.Language != "python" || req.Task != "write the weekly report" || req.Previous != nil {
		t.Errorf("request %+v", req)
	}
	if f.search.limits[0] != 2+maxSkills {
		t.Errorf("search limit %d", f.search.limits[0])
	}
}

func TestTaskErrors(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	f.gen("g", code("print(1)"))
	for _, tt := range []struct {
		name string
		req  TaskRequest
		want error
	}{
		{name: "empty task", req: TaskRequest{Tenant: "acme", Task: "  "}, want: pluginapi.ErrInvalidArgument},
		{name: "bad tenant", req: TaskRequest{Tenant: "../x", Task: "go"}, want: pluginapi.ErrInvalidArgument},
		{name: "bad session", req: TaskRequest{Tenant: "acme", Session: "../s", Task: "go"}, want: pluginapi.ErrInvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.tasks.ExecuteTask(context.Background(), tt.req); !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("backend down", func(t *testing.T) {
		f.runner.err = errors.New("sandbox backend stopped")
		if _, err := f.tasks.ExecuteTask(context.Background(), TaskRequest{Tenant: "acme", Task: "go"}); err == nil ||
			!strings.Contains(err.Error(), "sandbox backend stopped") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := f.tasks.ExecuteTask(ctx, TaskRequest{Tenant: "acme", Task: "go"}); !errors.Is(err, context.Canceled) {
			t.Errorf("err %v", err)
		}
	})
}

// TestTaskTimings checks that the generator's time is counted as Generate,
// not as overhead. It compares the pipeline's figure with the time the
// generator itself measured, never with a wall-clock bound, which a loaded
// machine would break.
func TestTaskTimings(t *testing.T) {
	f := newFixture(t, workspace.Quota{})
	var inside time.Duration
	f.gen("slow", func(context.Context, codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		start := time.Now()
		time.Sleep(30 * time.Millisecond)
		inside = time.Since(start)
		return codegen.GenerateResponse{Code: "print(1)"}, nil
	})
	res := f.run(t, "go")
	tm := res.Timings
	if tm.Generate < inside || tm.Total < tm.Generate+tm.Execute || tm.Overhead() < 0 {
		t.Errorf("timings %+v, overhead %s, generator took %s: the generator's time must count as Generate", tm, tm.Overhead(), inside)
	}
	if res.Attempts[0].Duration < inside {
		t.Errorf("attempt duration %s, generator took %s", res.Attempts[0].Duration, inside)
	}
}

func TestTaskConfigFrom(t *testing.T) {
	cfg := &config.Config{
		Pipeline: config.Pipeline{Codegen: []string{"llm", "rules"}, Guards: []string{"pii"}, MaxRepairs: 3, SearchLimit: 5},
		Plugins: []*config.Plugin{
			{Kind: pluginapi.KindCodegen, Name: "llm", Timeout: 3 * time.Minute},
			{Kind: pluginapi.KindCodegen, Name: "rules", Timeout: 10 * time.Second},
			{Kind: pluginapi.KindGuard, Name: "pii", Timeout: time.Second},
		},
	}
	tc := TaskConfigFrom(cfg)
	if !slices.Equal(tc.Codegen, []string{"llm", "rules"}) ||
		tc.MaxRepairs != 3 || tc.SearchLimit != 5 ||
		tc.GenerateTimeouts["llm"] != 3*time.Minute || tc.GenerateTimeouts["rules"] != 10*time.Second || len(tc.GenerateTimeouts) != 2 {
		t.Errorf("%+v", tc)
	}
}
