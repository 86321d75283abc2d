package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
)

// execute_task end to end: cexecd with the real plugins (bwrap sandbox,
// embeddings selector, pii guard, rules and llm generators) over the real
// filesystem and memory reference servers, driven through `cexecctl task`.

// taskSetup is a daemon config for execute_task tests, with a directory of
// sample files behind the filesystem server and a memory file.
type taskSetup struct {
	setup
	files   string
	memFile string
}

// taskJSON is the part of `cexecctl task --json` the tests read.
type taskJSON struct {
	Status    string `json:"status"`
	Stdout    string `json:"stdout"`
	ExitCode  int    `json:"exit_code"`
	Session   string `json:"session"`
	Generator string `json:"generator"`
	Model     string `json:"model"`
	Code      string `json:"code"`
	Error     *struct {
		Type      string `json:"type"`
		Traceback string `json:"traceback"`
	} `json:"error"`
	PromptTokens       int64 `json:"prompt_tokens"`
	CompletionTokens   int64 `json:"completion_tokens"`
	ToolsDiscovered    int   `json:"tools_discovered"`
	ToolsSelected      int   `json:"tools_selected"`
	Repairs            int   `json:"repairs"`
	PipelineOverheadUs int64 `json:"pipeline_overhead_us"`
	Timings            struct {
		GenerateUs int64 `json:"generate_us"`
		ExecuteUs  int64 `json:"execute_us"`
		TotalUs    int64 `json:"total_us"`
	} `json:"timings"`
	Attempts []struct {
		Generator string `json:"generator"`
		Model     string `json:"model"`
		Round     int    `json:"round"`
		Wide      bool   `json:"wide"`
		Code      string `json:"code"`
		Error     string `json:"error"`
	} `json:"attempts"`
	Diagnostics []struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
	} `json:"diagnostics"`
	ToolCalls []toolCallJSON `json:"tool_calls"`
}

type toolCallJSON struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	OK     bool   `json:"ok"`
}

var extraBuilds sync.Map // plugin name -> error of its build

// buildPlugin builds a plugin the default cexec.hcl does not name into the
// harness's plugin_dir, once per run.
func buildPlugin(t *testing.T, name string) {
	t.Helper()
	v, _ := extraBuilds.LoadOrStore(name, sync.OnceValue(func() error {
		return testutil.GoBuild(filepath.Join(bins.pluginDir, "cexec-plugin-"+name), "./plugins/"+name)
	}))
	if err := v.(func() error)(); err != nil {
		t.Fatal(err)
	}
}

// sampleFiles are what the filesystem server serves.
var sampleFiles = map[string]string{
	"notes/todo.txt": "buy milk\ncall Bob\nbook flights\n",
	"notes/ideas.md": "# Ideas\n- a garden on the roof\n",
	"report.md":      "# Q3 report\nRevenue grew 12% over Q2.\n",
	"data.csv":       "region,revenue\nnorth,120\nsouth,95\n",
}

// newTaskSetup writes a config with the real plugins, the pipeline chain
// codegen, extra plugin blocks, and the two reference servers.
func newTaskSetup(t *testing.T, codegen []string, extra string) taskSetup {
	t.Helper()
	fsServer, memServer := testpeers.Bin(t, "mcp-server-filesystem"), testpeers.Bin(t, "mcp-server-memory")
	for _, p := range []string{"sandbox-bwrap", "selector-embeddings", "guard-pii", "codegen-rules"} {
		if _, err := os.Stat(filepath.Join(bins.pluginDir, "cexec-plugin-"+p)); err != nil {
			testutil.SkipMissing(t, "plugin %s was not built: %v", p, err)
		}
	}
	s := newSetup(t)
	ts := taskSetup{setup: s, files: filepath.Join(s.dir, "files"), memFile: filepath.Join(s.dir, "memory", "memory.jsonl")}
	for name, body := range sampleFiles {
		p := filepath.Join(ts.files, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(ts.memFile), 0o700); err != nil {
		t.Fatal(err)
	}
	// The shipped local tools, which the word-count and CSV rules use.
	if err := os.CopyFS(filepath.Join(s.dir, "servers", "textutils"), os.DirFS(filepath.Join(testutil.ModuleRoot(), "servers", "textutils"))); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(codegen))
	for i, c := range codegen {
		quoted[i] = fmt.Sprintf("%q", c)
	}
	cfg := fmt.Sprintf(`cexec {
  data_dir   = %q
  socket     = %q
  plugin_dir = %q
  log_level  = "debug"
}

plugin "sandbox" "bwrap" {}
plugin "selector" "embeddings" {}
plugin "codegen" "rules" {}

# Forgetting is reviewed by a human: the guard denies programs that delete
# entities.
plugin "guard" "pii" {
  code_rule {
    name    = "no_forgetting"
    match   = ["delete_entities"]
    message = "deleting memories needs a human"
  }
}
%s
pipeline {
  selector     = "embeddings"
  codegen      = [%s]
  guards       = ["pii"]
  max_repairs  = 2
  search_limit = 8
}

mcp_server "filesystem" {
  command = %q
  args    = [%q]
}

mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = %q }
}
`, filepath.Join(s.dir, "data"), s.sock, bins.pluginDir, extra, strings.Join(quoted, ", "),
		fsServer, ts.files, memServer, ts.memFile)
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return ts
}

// task runs `cexecctl task --json` and decodes the answer; code is the exit
// status.
func task(t *testing.T, s setup, text string) (taskJSON, int) {
	t.Helper()
	out, errOut, code := ctl(t, s, "task", "--json", text)
	var r taskJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("task %q: exit %d, %v\nstdout: %s\nstderr: %s", text, code, err, out, errOut)
	}
	return r, code
}

func lines(s string) []string {
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestTaskRulesReferenceServers answers tasks with the offline rules
// generator over the real reference servers, asserting on what the
// programs printed and on what they changed on disk.
// It is long because its table of tasks shares one daemon and its two
// reference servers, costly to start.
func TestTaskRulesReferenceServers(t *testing.T) {
	ts := newTaskSetup(t, []string{"rules"}, "")
	startDaemon(t, ts.setup)

	tests := []struct {
		task string
		rule string
		// want is the exact output; unordered compares its lines as a set
		// (directory listings come in the server's order).
		want      string
		unordered bool
		call      string
		// check verifies a side effect outside the output.
		check func(t *testing.T)
	}{
		{task: "list the files", rule: "list_files", want: "data.csv\nnotes/\nreport.md\n", unordered: true, call: "filesystem/list_directory"},
		{task: "list files in notes", rule: "list_files", want: "ideas.md\ntodo.txt\n", unordered: true, call: "filesystem/list_directory"},
		{task: "how many files are in notes?", rule: "count_files", want: "2\n", call: "filesystem/list_directory"},
		{task: "read notes/todo.txt", rule: "read_file", want: "buy milk\ncall Bob\nbook flights\n\n", call: "filesystem/read_text_file"},
		{task: "how many lines are in notes/todo.txt?", rule: "count_lines", want: "3\n", call: "filesystem/read_text_file"},
		{task: "find files matching *.md", rule: "search_files", want: "notes/ideas.md\nreport.md\n", call: "filesystem/search_files"},
		{task: "which files mention Q3?", rule: "files_containing", want: "report.md\n", call: "filesystem/read_text_file"},
		{task: `write "hello from cexec" to hello.txt`, rule: "write_file", want: "wrote 16 characters to hello.txt\n", call: "filesystem/write_file",
			check: func(t *testing.T) {
				b, err := os.ReadFile(filepath.Join(ts.files, "hello.txt"))
				if err != nil || string(b) != "hello from cexec" {
					t.Errorf("hello.txt on disk: %q, %v", b, err)
				}
			}},
		{task: "remember that Alice works at Acme", rule: "remember", want: "remembered: Alice works at Acme\n", call: "memory/create_entities",
			check: func(t *testing.T) {
				b, err := os.ReadFile(ts.memFile)
				if err != nil || !strings.Contains(string(b), `"name":"Alice"`) || !strings.Contains(string(b), "works at Acme") {
					t.Errorf("memory file: %s, %v", b, err)
				}
			}},
		{task: "what do you know about Alice?", rule: "recall", want: "Alice: works at Acme\n", call: "memory/open_nodes"},
		{task: "remember that Alice likes tea", rule: "remember", want: "remembered: Alice likes tea\n", call: "memory/add_observations"},
		{task: "remember that Bob Smith speaks French", rule: "remember", want: "remembered: Bob Smith speaks French\n", call: "memory/create_entities"},
		{task: "list all memories", rule: "list_memory", want: "Alice: works at Acme; likes tea\nBob Smith: speaks French\n", call: "memory/read_graph"},
		{task: "what is 2 + 3 * 4", rule: "arithmetic", want: "14\n"},
		{task: "what is 12 times 7?", rule: "arithmetic", want: "84\n"},
		{task: "divide 100 by 8", rule: "arithmetic", want: "12.5\n"},
		{task: "count the words in notes/todo.txt", rule: "word_count", call: "filesystem/read_text_file",
			want: "6 words (6 distinct) in 3 lines\nmost frequent: buy (1), milk (1), call (1), bob (1), book (1)\n"},
		{task: "summarize data.csv", rule: "csv_summary", call: "filesystem/read_text_file",
			want: "2 rows, 2 columns\n- region (text, 0 empty): most common: north (1), south (1)\n- revenue (int, 0 empty): min 95, max 120, mean 107.5, sum 215\n"},
		{task: "calculate (17 - 5) / 4", rule: "arithmetic", want: "3\n"},
		{task: "sum of 1, 2, 3 and 4", rule: "aggregate_numbers", want: "10\n"},
		{task: "average of 4, 8 and 15", rule: "aggregate_numbers", want: "9\n"},
		// PII: the rule matched the tokenized task ("remember that [EMAIL_1]
		// is ..."), the guard layer restored the address in the program, and
		// the operator gets it back in the answer.
		{task: "remember that bob@example.com is Bob's address", rule: "remember", want: "remembered: bob@example.com is Bob's address\n",
			call: "memory/create_entities",
			check: func(t *testing.T) {
				b, err := os.ReadFile(ts.memFile)
				if err != nil || !strings.Contains(string(b), `"name":"bob@example.com"`) {
					t.Errorf("memory file: %s, %v", b, err)
				}
			}},
		{task: "what do you know about bob@example.com?", rule: "recall", want: "bob@example.com: is Bob's address\n", call: "memory/open_nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.task, func(t *testing.T) {
			r, code := task(t, ts.setup, tt.task)
			if code != 0 || r.Status != "ok" {
				t.Fatalf("exit %d, status %s: %+v", code, r.Status, r)
			}
			if r.Generator != "rules" || r.Model != "rules/"+tt.rule {
				t.Errorf("written by %s (%s), want rules (rules/%s)", r.Generator, r.Model, tt.rule)
			}
			got, want := r.Stdout, tt.want
			if tt.unordered {
				got, want = strings.Join(sorted(lines(got)), "\n"), strings.Join(sorted(lines(want)), "\n")
			}
			if got != want {
				t.Errorf("stdout %q, want %q", r.Stdout, tt.want)
			}
			if tt.call != "" {
				if !slices.ContainsFunc(r.ToolCalls, func(c toolCallJSON) bool { return c.Server+"/"+c.Tool == tt.call && c.OK }) {
					t.Errorf("tool calls %+v lack a successful %s", r.ToolCalls, tt.call)
				}
				if r.ToolsSelected == 0 {
					t.Errorf("no tools selected")
				}
			}
			// filesystem has 14 tools and memory 9 in the pinned servers;
			// at least both servers' tools must have been searched.
			if r.ToolsDiscovered < 20 || r.ToolsSelected > r.ToolsDiscovered {
				t.Errorf("tools discovered %d, selected %d", r.ToolsDiscovered, r.ToolsSelected)
			}
			if r.PromptTokens != 0 || r.Repairs != 0 || r.PipelineOverheadUs <= 0 || r.Timings.TotalUs < r.PipelineOverheadUs {
				t.Errorf("tokens %d, repairs %d, overhead %dus of %dus", r.PromptTokens, r.Repairs, r.PipelineOverheadUs, r.Timings.TotalUs)
			}
			if tt.check != nil {
				tt.check(t)
			}
		})
	}

	t.Run("plain output", func(t *testing.T) {
		out := mustCtl(t, ts.setup, "task", "how many lines are in notes/todo.txt?")
		if out != "3\n" {
			t.Errorf("stdout %q", out)
		}
		out, errOut, code := ctl(t, ts.setup, "task", "-v", "what is 2 + 3 * 4")
		if code != 0 || out != "14\n" || !strings.Contains(errOut, "generator  rules (rules/arithmetic)") ||
			!strings.Contains(errOut, "pipeline overhead") || !strings.Contains(errOut, `ast.parse("2 + 3 * 4"`) {
			t.Errorf("-v: exit %d\nstdout %q\nstderr:\n%s", code, out, errOut)
		}
	})

	// A question no rule answers is refused, saying what the rules do,
	// rather than answered by a rule that half matches it.
	t.Run("refusal", func(t *testing.T) {
		for _, q := range []string{"what is the capital of France?", "who is Alice?"} {
			out, errOut, code := ctl(t, ts.setup, "task", q)
			if code == 0 || out != "" || !strings.Contains(errOut, "the rules generator answers only tasks in these forms") {
				t.Errorf("%q: exit %d\nstdout %q\nstderr:\n%s", q, code, out, errOut)
			}
		}
	})

	t.Run("the session log keeps tokens", func(t *testing.T) {
		r, _ := task(t, ts.setup, "what do you know about bob@example.com?")
		b, err := os.ReadFile(filepath.Join(ts.dir, "data", "tenants", "default", "sessions", r.Session+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "bob@example.com") || !strings.Contains(string(b), "[EMAIL_1]") {
			t.Errorf("the session log should hold the model-facing form:\n%s", b)
		}
		if r.Stdout != "bob@example.com: is Bob's address\n" {
			t.Errorf("stdout %q", r.Stdout)
		}
	})

	t.Run("the session log records the task", func(t *testing.T) {
		r, _ := task(t, ts.setup, "list files in notes")
		b, err := os.ReadFile(filepath.Join(ts.dir, "data", "tenants", "default", "sessions", r.Session+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var entry struct {
			Task string `json:"task"`
			Code string `json:"code"`
		}
		for _, l := range lines(string(b)) {
			if err := json.Unmarshal([]byte(l), &entry); err != nil {
				t.Fatal(err)
			}
			if entry.Task != "" {
				break
			}
		}
		if entry.Task != "list files in notes" || entry.Code != r.Code {
			t.Errorf("session log entry %+v\n%s", entry, b)
		}
	})

	t.Run("guard denies", func(t *testing.T) {
		r, code := task(t, ts.setup, "forget Alice")
		if code != 1 || r.Status != "denied" || r.Model != "rules/forget" || len(r.ToolCalls) != 0 {
			t.Fatalf("exit %d: %+v", code, r)
		}
		if len(r.Diagnostics) == 0 || r.Diagnostics[0].Severity != "error" || !strings.Contains(r.Diagnostics[0].Detail, "guard pii") ||
			!strings.Contains(r.Diagnostics[0].Detail, "deleting memories needs a human") {
			t.Errorf("diagnostics %+v", r.Diagnostics)
		}
		if again, _ := task(t, ts.setup, "what do you know about Alice?"); again.Stdout != "Alice: works at Acme; likes tea\n" {
			t.Errorf("Alice after the denied forget: %q", again.Stdout)
		}
		_, errOut, code := ctl(t, ts.setup, "task", "forget Alice")
		if code != 1 || !strings.Contains(errOut, "a guard denied the program") {
			t.Errorf("plain: exit %d, %s", code, errOut)
		}
	})

	t.Run("no rule", func(t *testing.T) {
		r, code := task(t, ts.setup, "compose a sonnet about the sea")
		if code != 1 || r.Status != "no_code" || r.Code != "" {
			t.Fatalf("exit %d: %+v", code, r)
		}
		if len(r.Diagnostics) == 0 || !strings.Contains(r.Diagnostics[0].Detail, "no rule matches the task") {
			t.Errorf("diagnostics %+v", r.Diagnostics)
		}
	})

	t.Run("bench task", func(t *testing.T) {
		out := mustCtl(t, ts.setup, "bench", "task", "--n", "20", "--warmup", "2", "--json",
			"--task", "what is 2 + 3 * 4", "--task", "list the files", "--task", "what do you know about Alice?")
		var b struct {
			N                  int            `json:"n"`
			Generators         map[string]int `json:"generators"`
			PipelineOverheadUs struct {
				P50 float64 `json:"p50"`
				P90 float64 `json:"p90"`
			} `json:"pipeline_overhead_us"`
			TotalUs struct {
				P50 float64 `json:"p50"`
			} `json:"total_us"`
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if b.N != 20 || b.Generators["rules"] != 20 || b.PipelineOverheadUs.P50 <= 0 || b.TotalUs.P50 < b.PipelineOverheadUs.P50 {
			t.Fatalf("bench: %s", out)
		}
		t.Logf("pipeline overhead p50 %.0fus p90 %.0fus, task total p50 %.0fus (20 runs)",
			b.PipelineOverheadUs.P50, b.PipelineOverheadUs.P90, b.TotalUs.P50)
	})
}

// chatServer is a protocol-level OpenAI-compatible chat completions server:
// real HTTP, answering each request with reply(n, body) for the n-th request
// (from 1).
type chatServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newChatServer(t *testing.T, reply func(n int, body string, w http.ResponseWriter)) *chatServer {
	t.Helper()
	cs := &chatServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cs.mu.Lock()
		cs.bodies = append(cs.bodies, string(b))
		n := len(cs.bodies)
		cs.mu.Unlock()
		reply(n, string(b), w)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *chatServer) requests() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return slices.Clone(cs.bodies)
}

// completion answers with a chat completion whose message is a fenced
// program.
func completion(w http.ResponseWriter, program string, prompt, completionTokens int) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-e2e", "object": "chat.completion", "created": 1, "model": "e2e-coder-served",
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "Here is the program:\n```python\n" + program + "```\n"},
		}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completionTokens, "total_tokens": prompt + completionTokens},
	})
}

func llmBlock(url string) string {
	return fmt.Sprintf(`
plugin "codegen" "llm" {
  provider    = "openai_compatible"
  base_url    = %q
  model       = "e2e-coder"
  max_retries = 0
  timeout     = "30s"
}
`, url+"/v1")
}

// TestTaskRepairLoopWithOpenAICompatibleServer has codegen-llm, first in
// the chain, talk to a protocol-level OpenAI-compatible server in the test:
// its first program raises, the repair request carries the program and the
// traceback, and the second program answers.
func TestTaskRepairLoopWithOpenAICompatibleServer(t *testing.T) {
	buildPlugin(t, "codegen-llm")
	// The programs name the file by its absolute path, known once the
	// setup exists; the server only answers after that.
	var files atomic.Pointer[string]
	cs := newChatServer(t, func(n int, _ string, w http.ResponseWriter) {
		todo := filepath.Join(*files.Load(), "notes", "todo.txt")
		switch n {
		case 1:
			completion(w, fmt.Sprintf("from servers.filesystem import read_text_file\n\nr = read_text_file(path=%q)\nprint(len(r[\"lines\"]))\n", todo), 700, 40)
		default:
			completion(w, fmt.Sprintf("from servers.filesystem import read_text_file\n\nr = read_text_file(path=%q)\nprint(len(r[\"content\"].splitlines()))\n", todo), 900, 45)
		}
	})
	ts := newTaskSetup(t, []string{"llm", "rules"}, llmBlock(cs.URL))
	files.Store(&ts.files)
	startDaemon(t, ts.setup)

	const todoTask = "how many lines are in notes/todo.txt? the answer goes to bob@example.com"
	r, code := task(t, ts.setup, todoTask)
	if code != 0 || r.Status != "ok" || r.Stdout != "3\n" {
		t.Fatalf("exit %d: %+v", code, r)
	}
	if r.Generator != "llm" || r.Model != "e2e-coder-served" || r.Repairs != 1 || len(r.Attempts) != 2 {
		t.Fatalf("generator %s (%s), repairs %d, attempts %+v", r.Generator, r.Model, r.Repairs, r.Attempts)
	}
	if a := r.Attempts[0]; a.Round != 0 || !strings.Contains(a.Error, "KeyError: 'lines'") || !strings.Contains(a.Code, `r["lines"]`) {
		t.Errorf("first attempt %+v", a)
	}
	if a := r.Attempts[1]; a.Round != 1 || a.Error != "" || a.Code != r.Code || !strings.Contains(r.Code, `r["content"].splitlines()`) {
		t.Errorf("second attempt %+v", a)
	}
	if r.PromptTokens != 1600 || r.CompletionTokens != 85 {
		t.Errorf("tokens %d + %d, want the server's usage summed: 1600 + 85", r.PromptTokens, r.CompletionTokens)
	}
	if r.PipelineOverheadUs <= 0 || r.Timings.GenerateUs <= 0 || r.Timings.TotalUs < r.Timings.GenerateUs+r.Timings.ExecuteUs {
		t.Errorf("timings %+v, overhead %dus", r.Timings, r.PipelineOverheadUs)
	}

	reqs := cs.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	// The first prompt carries the selected stubs and the task with its PII
	// tokenized; the repair prompt the failed program and its traceback.
	if !strings.Contains(reqs[0], "from servers.filesystem import read_text_file") ||
		!strings.Contains(reqs[0], "how many lines are in notes/todo.txt? the answer goes to [EMAIL_1]") {
		t.Errorf("first request lacks the tokenized task or the read_text_file stub:\n%s", reqs[0])
	}
	for i, body := range reqs {
		if strings.Contains(body, "bob@example.com") {
			t.Errorf("request %d sent the e-mail address to the model", i+1)
		}
	}
	for _, want := range []string{"previous program failed", `r[\"lines\"]`, "Traceback", "KeyError: 'lines'"} {
		if !strings.Contains(reqs[1], want) {
			t.Errorf("repair request lacks %q:\n%s", want, reqs[1])
		}
	}
}

// TestTaskChainFallsBackToRules has codegen-llm first in the chain against
// an OpenAI-compatible server that answers every request with HTTP 500: the
// rules generator, next in the chain, writes the program.
func TestTaskChainFallsBackToRules(t *testing.T) {
	buildPlugin(t, "codegen-llm")
	cs := newChatServer(t, func(_ int, _ string, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"the model is overloaded","type":"server_error"}}`)
	})
	ts := newTaskSetup(t, []string{"llm", "rules"}, llmBlock(cs.URL))
	startDaemon(t, ts.setup)

	r, code := task(t, ts.setup, "list files in notes")
	if code != 0 || r.Status != "ok" || strings.Join(sorted(lines(r.Stdout)), ",") != "ideas.md,todo.txt" {
		t.Fatalf("exit %d: %+v", code, r)
	}
	if r.Generator != "rules" || r.Model != "rules/list_files" || len(r.Attempts) != 2 {
		t.Fatalf("generator %s, attempts %+v", r.Generator, r.Attempts)
	}
	if a := r.Attempts[0]; a.Generator != "llm" || a.Code != "" || !strings.Contains(a.Error, "500") {
		t.Errorf("llm attempt %+v: want the server's 500 in its error", a)
	}
	if n := len(cs.requests()); n != 1 {
		t.Errorf("%d requests to the LLM server, want 1 (max_retries = 0)", n)
	}
}

// TestTaskPromptTokenized: what execute_task sends the model holds no
// tenant data raw. A workspace file named by an e-mail address is listed in
// the prompt as a token; the program the model writes with that token
// reads the real file.
func TestTaskPromptTokenized(t *testing.T) {
	buildPlugin(t, "codegen-llm")
	const email = "ann@example.com"
	nameRE := regexp.MustCompile(`contacts/(\[EMAIL_[0-9]+\])`)
	cs := newChatServer(t, func(_ int, body string, w http.ResponseWriter) {
		m := nameRE.FindStringSubmatch(body)
		if m == nil {
			http.Error(w, "the prompt lists no tokenized contact file", http.StatusBadRequest)
			return
		}
		completion(w, fmt.Sprintf("print(open(%q).read(), end='')\n", "/workspace/contacts/"+m[1]), 100, 10)
	})
	ts := newTaskSetup(t, []string{"llm"}, llmBlock(cs.URL))
	startDaemon(t, ts.setup)
	// The tenant's own program leaves the file, as tenants' files come to
	// be: the workspace is the tenant's file system image, mounted when
	// the daemon first opens it.
	if r, _ := sbxJSON(t, ts.setup, "-c", fmt.Sprintf("import os\nos.makedirs('contacts', exist_ok=True)\nopen('contacts/%s', 'w').write('call Ann on Monday\\n')\n", email)); r.ExitCode != 0 {
		t.Fatalf("write the contact file: %+v", r)
	}

	r, code := task(t, ts.setup, "what does the contact file say?")
	if code != 0 || r.Status != "ok" || r.Stdout != "call Ann on Monday\n" {
		t.Fatalf("exit %d: %+v\n%+v", code, r, r.Attempts)
	}
	reqs := cs.requests()
	if len(reqs) == 0 {
		t.Fatal("no chat request")
	}
	for i, body := range reqs {
		if strings.Contains(body, email) {
			t.Errorf("request %d sent the workspace file's name raw:\n%s", i+1, body)
		}
	}
}
