package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type workflowRunJSON struct {
	Run        string `json:"run"`
	State      string `json:"state"`
	TasksDone  int    `json:"tasks_done"`
	OutputJSON string `json:"output_json"`
	ErrorJSON  string `json:"error_json"`
}

type journalRecord struct {
	Seq  int    `json:"seq"`
	Kind string `json:"kind"`
	Path string `json:"path"`
}

func workflowStatus(t *testing.T, s setup, args ...string) workflowRunJSON {
	t.Helper()
	var st workflowRunJSON
	if err := json.Unmarshal([]byte(mustCtl(t, s, append([]string{"workflow", "status", "--json"}, args...)...)), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func workflowJournal(t *testing.T, s setup, run string) []journalRecord {
	t.Helper()
	var out []journalRecord
	for _, line := range strings.Split(strings.TrimSpace(mustCtl(t, s, "workflow", "logs", "--json", run)), "\n") {
		var r journalRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// checkNoRerun fails when a task finished twice or its effect started
// again after it finished: a finished task is never run again.
func checkNoRerun(t *testing.T, run string, recs []journalRecord) (reruns int) {
	t.Helper()
	done := map[string]bool{}
	for _, r := range recs {
		switch r.Kind {
		case "done":
			if done[r.Path] {
				t.Errorf("run %s: task %s finished twice", run, r.Path)
			}
			done[r.Path] = true
		case "start", "rerun":
			if done[r.Path] {
				t.Errorf("run %s: task %s started again after it finished (record %d)", run, r.Path, r.Seq)
			}
			if r.Kind == "rerun" {
				reruns++
			}
		}
	}
	return reruns
}

const wantNotes = `{"notes":3,"remembered":["apple","banana"]}`

// TestWorkflows runs the shared example workflow (filesystem and memory
// reference servers, a loop, a switch, a Python step that fails once and is
// retried) through cexecctl on a real cexecd, checks that a broken document
// is reported with its lines, and then kills cexecd with SIGKILL at random
// points of 20 runs: after each restart the run resumes and completes, and
// its journal shows no finished task run again.
func TestWorkflows(t *testing.T) {
	ts := newToolsSetup(t)
	s := ts.setup
	d := startDaemon(t, s)
	requireSandbox(t, s)
	input := fmt.Sprintf(`{"folder": %q}`, filepath.Join(ts.files, "notes"))

	t.Run("validate", func(t *testing.T) {
		bad := filepath.Join(s.dir, "bad.yaml")
		doc := "document:\n  dsl: 1.0.0\n  namespace: t\n  name: bad\n  version: 1.0.0\ndo:\n  - a:\n      call: mcp\n      with:\n        server: nosuch\n        tool: x\n  - b:\n      call: http\n"
		if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := ctl(t, s, "workflow", "validate", bad)
		if code != 1 || !strings.Contains(out, bad+`:10:17: task a: with.server: "nosuch" is not an mcp_server of cexec.hcl`) ||
			!strings.Contains(out, bad+":13:13: task b: call: http is not supported") {
			t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
		}
		// save names the problems in the file given, not in NAME.yaml.
		out, errOut, code = ctl(t, s, "workflow", "save", "mine", bad)
		if code != 1 || !strings.Contains(errOut, bad+`:10:17: task a: with.server: "nosuch"`) || strings.Contains(errOut, "mine.yaml") {
			t.Fatalf("save: exit %d\n%s\n%s", code, out, errOut)
		}
		out = mustCtl(t, s, "workflow", "validate", filepath.Join("..", "workflows", "notes-to-memory.yaml"))
		if !strings.Contains(out, "ok (examples/notes-to-memory:1.0.0)") {
			t.Errorf("validate example: %s", out)
		}
	})

	t.Run("resources and prompts", func(t *testing.T) {
		doc := filepath.Join(s.dir, "methods.yaml")
		src := `document: {dsl: 1.0.0, namespace: t, name: methods, version: 1.0.0}
do:
  - res:
      call: mcp
      with:
        server: everything
        method: resources/read
        parameters: {uri: "demo://resource/dynamic/text/7"}
      export: {as: '${ {text: .contents[0].text} }'}
  - prompt:
      call: mcp
      with:
        server: everything
        method: prompts/get
        parameters: {name: args-prompt, arguments: {city: Paris}}
      output: {as: '${ {resource: $context.text, prompt: .messages[0].content.text} }'}
`
		if err := os.WriteFile(doc, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := ctl(t, s, "workflow", "run", doc)
		if code != 0 || !strings.Contains(out, `"resource":"Resource 7: This is a plaintext resource`) || !strings.Contains(out, `"prompt":"What's weather in Paris?"`) {
			t.Fatalf("resources/read and prompts/get: exit %d\n%s\n%s", code, out, errOut)
		}
	})

	var runTime time.Duration
	t.Run("run", func(t *testing.T) {
		start := time.Now()
		out, errOut, code := ctl(t, s, "workflow", "run", "notes-to-memory", "--input", input)
		runTime = time.Since(start)
		if code != 0 || !strings.Contains(out, "state:    completed") || !strings.Contains(out, "output:   "+wantNotes) {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
		}
		if !strings.Contains(errOut, "tasks done, at") {
			t.Errorf("no progress on stderr:\n%s", errOut)
		}
		run := strings.Fields(strings.SplitN(out, "\n", 2)[0])[1]
		recs := workflowJournal(t, s, run)
		caught := slices.IndexFunc(recs, func(r journalRecord) bool { return r.Kind == "caught" && strings.HasPrefix(r.Path, "/tally/try@0") })
		if caught < 0 {
			t.Errorf("the failing step's first try is not in the journal as caught: %+v", recs)
		}
		checkNoRerun(t, run, recs)
		ls := mustCtl(t, s, "workflow", "ls")
		if !strings.Contains(ls, run) || !strings.Contains(ls, "completed") {
			t.Errorf("ls:\n%s", ls)
		}
	})

	t.Run("kill", func(t *testing.T) {
		seed := time.Now().UnixNano()
		t.Logf("seed %d, a run takes about %s", seed, runTime)
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		reruns := 0
		for i := range 20 {
			var st workflowRunJSON
			if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--detach", "--json", "notes-to-memory", "--input", input)), &st); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(runTime) + 1)))
			if err := d.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-d.exited
			d = startDaemon(t, s)
			deadline := time.Now().Add(2 * time.Minute)
			for st = workflowStatus(t, s, st.Run); st.State != "completed" && st.State != "failed" && time.Now().Before(deadline); st = workflowStatus(t, s, st.Run) {
				time.Sleep(100 * time.Millisecond)
			}
			if st.State != "completed" || st.OutputJSON != wantNotes {
				t.Fatalf("run %d (%s) after SIGKILL: %s, output %s, error %s\n%s", i, st.Run, st.State, st.OutputJSON, st.ErrorJSON, mustCtl(t, s, "workflow", "logs", st.Run))
			}
			reruns += checkNoRerun(t, st.Run, workflowJournal(t, s, st.Run))
		}
		t.Logf("20 runs killed and resumed; %d tasks were in flight at a kill and ran again from their start", reruns)
	})
}

// TestWorkflowListen starts the shared approve-note workflow through the
// MCP face's workflow tool, sees it wait for its approval in cexecctl
// workflow status, answers with cexecctl workflow signal, and finds the
// note written by the filesystem server. A tenant whose policy denies the
// write gets the run failed by that policy, as a program's call would be.
func TestWorkflowListen(t *testing.T) {
	ts := newToolsSetup(t)
	s := ts.setup
	appendConfig(t, s, "\ntenant \"careful\" {\n  policy {\n    deny = [\"filesystem/write_file\"]\n  }\n}\n")
	startDaemon(t, s)
	requireSandbox(t, s)
	c := mcpSession(t, s, "default")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list := mcpCallText(ctx, t, c, "workflow", map[string]any{"action": "list"})
	if !strings.Contains(list, "approve-note: Write a note after a person approves it. (input: path, text)") ||
		!strings.Contains(list, "notes-to-memory: ") {
		t.Errorf("list through the face:\n%s", list)
	}
	note := filepath.Join(ts.files, "approved.txt")
	text := mcpCallText(ctx, t, c, "workflow", map[string]any{"action": "start", "name": "approve-note",
		"input": map[string]any{"path": note, "text": "approved by a person\n"}})
	if !strings.Contains(text, "(examples/approve-note:1.0.0)") {
		t.Fatalf("start through the face: %s", text)
	}
	run := strings.Fields(text)[1]
	var st workflowRunJSON
	for st = workflowStatus(t, s, run); st.State != "waiting"; st = workflowStatus(t, s, run) {
		time.Sleep(50 * time.Millisecond)
	}
	out := mustCtl(t, s, "workflow", "status", run)
	if !strings.Contains(out, "waiting:  ask for approval (cexecctl workflow signal "+run+" approval --data JSON)") {
		t.Fatalf("status does not show the pending approval:\n%s", out)
	}
	if _, errOut, code := ctl(t, s, "workflow", "signal", run, "other"); code != 1 || !strings.Contains(errOut, `does not wait for event "other"`) {
		t.Errorf("signal of the wrong event: exit %d %s", code, errOut)
	}
	mustCtl(t, s, "workflow", "signal", run, "approval", "--data", `{"approved": true}`)
	for st = workflowStatus(t, s, run); st.State != "completed" && st.State != "failed"; st = workflowStatus(t, s, run) {
		time.Sleep(50 * time.Millisecond)
	}
	if st.State != "completed" {
		t.Fatalf("run %s: %s %s", run, st.State, st.ErrorJSON)
	}
	if b, err := os.ReadFile(note); err != nil || string(b) != "approved by a person\n" {
		t.Errorf("note: %q %v", b, err)
	}
	status := mcpCallText(ctx, t, c, "workflow", map[string]any{"action": "status", "run": run})
	if !strings.Contains(status, "completed") || !strings.Contains(status, note) {
		t.Errorf("status through the face: %s", status)
	}

	denied := filepath.Join(ts.files, "denied.txt")
	var cst workflowRunJSON
	if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--tenant", "careful", "--detach", "--json", "approve-note",
		"--input", fmt.Sprintf(`{"path": %q, "text": "no"}`, denied))), &cst); err != nil {
		t.Fatal(err)
	}
	for cst = workflowStatus(t, s, "--tenant=careful", cst.Run); cst.State != "waiting"; cst = workflowStatus(t, s, "--tenant=careful", cst.Run) {
		time.Sleep(50 * time.Millisecond)
	}
	mustCtl(t, s, "workflow", "signal", "--tenant", "careful", cst.Run, "approval", "--data", `{"approved": true}`)
	for cst = workflowStatus(t, s, "--tenant=careful", cst.Run); cst.State != "completed" && cst.State != "failed"; cst = workflowStatus(t, s, "--tenant=careful", cst.Run) {
		time.Sleep(50 * time.Millisecond)
	}
	if cst.State != "failed" || !strings.Contains(cst.ErrorJSON, "write_file") {
		t.Errorf("a write the tenant's policy denies: %s %s", cst.State, cst.ErrorJSON)
	}
	if _, err := os.Stat(denied); err == nil {
		t.Error("the denied write happened")
	}
}

// waitState polls a run until it reaches one of states.
func waitState(t *testing.T, s setup, run string, states ...string) workflowRunJSON {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := workflowStatus(t, s, run)
		if slices.Contains(states, st.State) {
			return st
		}
		if st.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("run %s is %s, not %v: %s\n%s", run, st.State, states, st.ErrorJSON, mustCtl(t, s, "workflow", "logs", run))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkflowForm runs the shared fill-form workflow: fields prefilled
// from the memory server, the missing one asked for, approval, the form
// written and read back through the filesystem server, a report per field.
func TestWorkflowForm(t *testing.T) {
	ts := newToolsSetup(t)
	s := ts.setup
	startDaemon(t, s)
	requireSandbox(t, s)
	mustCtl(t, s, "exec", "-c", `from servers.memory import create_entities
create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": ["name: Ada Lovelace", "email: ada@example.com", "likes: engines"]}])`)
	out := filepath.Join(ts.files, "ada-form.json")
	input := fmt.Sprintf(`{"subject": "Ada", "out": %q, "form": {"type": "object", "required": ["name", "email", "city"],
		"properties": {"name": {"type": "string"}, "email": {"type": "string"}, "city": {"type": "string"}, "phone": {"type": "string"}}}}`, out)
	var st workflowRunJSON
	if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--detach", "--json", "fill-form", "--input", input)), &st); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, st.Run, "waiting")
	if text := mustCtl(t, s, "workflow", "status", st.Run); !strings.Contains(text, "waiting:  ask for form-input") {
		t.Fatalf("not waiting for the missing field:\n%s", text)
	}
	mustCtl(t, s, "workflow", "signal", st.Run, "form-input", "--data", `{"city": "Paris"}`)
	for {
		text := mustCtl(t, s, "workflow", "status", st.Run)
		if strings.Contains(text, "waiting:  approve for approval") {
			break
		}
		if !strings.Contains(text, "state:    running") && !strings.Contains(text, "state:    waiting") {
			t.Fatalf("after form-input:\n%s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustCtl(t, s, "workflow", "signal", st.Run, "approval", "--data", `{"approved": true}`)
	st = waitState(t, s, st.Run, "completed")
	want := fmt.Sprintf(`{"fields":{"city":"asked","email":"prefilled","name":"prefilled","phone":"empty"},"written":%q}`, out)
	if st.OutputJSON != want {
		t.Errorf("report %s, want %s", st.OutputJSON, want)
	}
	b, err := os.ReadFile(out)
	var form map[string]string
	if err != nil || json.Unmarshal(b, &form) != nil || form["city"] != "Paris" || form["email"] != "ada@example.com" || form["name"] != "Ada Lovelace" {
		t.Errorf("written form %s %v", b, err)
	}

	// cancel and resume through cexecctl
	var c2 workflowRunJSON
	if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--detach", "--json", "fill-form", "--input", input)), &c2); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, c2.Run, "waiting")
	if out := mustCtl(t, s, "workflow", "cancel", c2.Run); !strings.Contains(out, "state:    cancelled") {
		t.Errorf("cancel:\n%s", out)
	}
	if _, errOut, code := ctl(t, s, "workflow", "resume", c2.Run); code != 1 || !strings.Contains(errOut, "only an interrupted or failed run resumes") {
		t.Errorf("resume of a cancelled run: exit %d %s", code, errOut)
	}
}

// TestWorkflowPromptPolicy runs a workflow's prompts/get of
// server-everything's args-prompt for two tenants: the default tenant gets
// the prompt; one whose policy denies everything/get_prompt has the run
// failed by that policy, as a tool call it denies would be.
func TestWorkflowPromptPolicy(t *testing.T) {
	ts := newToolsSetup(t)
	s := ts.setup
	appendConfig(t, s, "\ntenant \"careful\" {\n  policy {\n    deny = [\"everything/get_prompt\"]\n  }\n}\n")
	startDaemon(t, s)
	requireSandbox(t, s)
	doc := filepath.Join(s.dir, "prompt.yaml")
	src := `document: {dsl: 1.0.0, namespace: t, name: prompt, version: 1.0.0}
do:
  - prompt:
      call: mcp
      with:
        server: everything
        method: prompts/get
        parameters: {name: args-prompt, arguments: {city: Paris}}
      output: {as: '${ {prompt: .messages[0].content.text} }'}
`
	if err := os.WriteFile(doc, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := ctl(t, s, "workflow", "run", doc)
	if code != 0 || !strings.Contains(out, `"prompt":"What's weather in Paris?"`) {
		t.Fatalf("allowed prompts/get: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = ctl(t, s, "workflow", "run", "--tenant", "careful", doc)
	if code == 0 || !strings.Contains(out+errOut, "get_prompt") || strings.Contains(out, "What's weather") {
		t.Fatalf("denied prompts/get: exit %d\n%s\n%s", code, out, errOut)
	}
}
