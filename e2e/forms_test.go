package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

// TestWorkflowPDFForm runs the shared fill-pdf-form workflow on a real
// cexecd: the applicant's data comes from a JSON file through the filesystem
// reference server, the form is examples/forms/application.pdf in the
// tenant's workspace, filled by the built-in forms server (pdfcpu, in
// cexecd). The one field the file lacks (city) is asked with a listen,
// answered here with cexecctl workflow signal (TestWorkflowAskTypeScriptClient
// answers through MCP elicitation), then approval. The filled PDF is read back with pdfcpu
// in this test, independently of the workflow's own read-back.
func TestWorkflowPDFForm(t *testing.T) {
	ts := newToolsSetup(t)
	s := ts.setup
	cfg, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, "\nmcp_server \"forms\" {\n  transport = \"builtin\"\n}\n"...)
	if err := os.WriteFile(s.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	source := filepath.Join(ts.files, "people", "ada.json")
	if err := os.MkdirAll(filepath.Dir(source), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(source, []byte(`{"name": "Ada Lovelace", "email": "ada@example.com", "plan": "premium", "likes": "engines"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	blank, err := os.ReadFile(filepath.Join("..", "examples", "forms", "application.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	startDaemon(t, s)
	requireSandbox(t, s)
	mustCtl(t, s, "exec", "-c", fmt.Sprintf(`import base64, os
os.makedirs("/workspace/forms", exist_ok=True)
open("/workspace/forms/application.pdf", "wb").write(base64.b64decode(%q))`, base64.StdEncoding.EncodeToString(blank)))

	input := fmt.Sprintf(`{"source": %q, "form": "forms/application.pdf", "out": "/workspace/forms/ada.pdf"}`, source)
	var st workflowRunJSON
	if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--detach", "--json", "fill-pdf-form", "--input", input)), &st); err != nil {
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
	mustCtl(t, s, "workflow", "signal", st.Run, "approval", "--data", `{"approved": true, "by": "alice"}`)
	st = waitState(t, s, st.Run, "completed")
	t.Logf("report %s", st.OutputJSON)

	type fieldReport struct {
		Value       any      `json:"value"`
		Source      string   `json:"source"`
		ConfirmedBy []string `json:"confirmed_by"`
		Filled      bool     `json:"filled"`
	}
	var report struct {
		Filled bool                   `json:"filled"`
		Out    string                 `json:"out"`
		Fields map[string]fieldReport `json:"fields"`
	}
	if err := json.Unmarshal([]byte(st.OutputJSON), &report); err != nil {
		t.Fatalf("report %s: %v", st.OutputJSON, err)
	}
	tool := "tool:filesystem.read_text_file"
	want := map[string]fieldReport{
		"name":       {"Ada Lovelace", tool, []string{"alice"}, true},
		"email":      {"ada@example.com", tool, []string{"alice"}, true},
		"plan":       {"premium", tool, []string{"alice"}, true},
		"newsletter": {false, "default", []string{"alice"}, true},
		"city":       {"Paris", "user", []string{"user", "alice"}, true},
	}
	if !report.Filled || report.Out != "/workspace/forms/ada.pdf" || !reflect.DeepEqual(report.Fields, want) {
		t.Errorf("report %s\nwant fields %+v", st.OutputJSON, want)
	}

	// The filled PDF, read back here with pdfcpu.
	got := readFilledPDF(t, s, "/workspace/forms/ada.pdf")
	wantPDF := map[string]any{"name": "Ada Lovelace", "email": "ada@example.com", "city": "Paris", "plan": "premium", "newsletter": false}
	if !reflect.DeepEqual(got, wantPDF) {
		t.Errorf("filled PDF holds %v, want %v", got, wantPDF)
	}

	// A value that is not one of its field's options is asked again, with
	// the question as an elicitation schema (SEP-1330 options, SEP-1034
	// default); a refused approval fills nothing.
	bob := filepath.Join(ts.files, "people", "bob.json")
	if err := os.WriteFile(bob, []byte(`{"name": "Bob", "email": "bob@example.com", "city": "Oslo", "plan": "gold", "newsletter": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	input = fmt.Sprintf(`{"source": %q, "form": "forms/application.pdf", "out": "forms/bob.pdf"}`, bob)
	if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--detach", "--json", "fill-pdf-form", "--input", input)), &st); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, st.Run, "waiting")
	var ask string
	for _, line := range strings.Split(mustCtl(t, s, "workflow", "logs", "--json", st.Run), "\n") {
		var rec struct {
			Kind   string `json:"kind"`
			Path   string `json:"path"`
			Output struct {
				Ask json.RawMessage `json:"ask"`
			} `json:"output"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Kind == "done" && rec.Path == "/prefill" {
			ask = string(rec.Output.Ask)
		}
	}
	wantAsk := `{"type":"object","properties":{"plan":{"title":"Plan","type":"string","oneOf":[{"const":"basic","title":"basic"},{"const":"standard","title":"standard"},{"const":"premium","title":"premium"}],"default":"standard"}},"required":["plan"]}`
	if compactJSON(t, ask) != compactJSON(t, wantAsk) {
		t.Errorf("ask %s\nwant %s", ask, wantAsk)
	}
	mustCtl(t, s, "workflow", "signal", st.Run, "form-input", "--data", `{"plan": "basic"}`)
	for !strings.Contains(mustCtl(t, s, "workflow", "status", st.Run), "waiting:  approve for approval") {
		time.Sleep(50 * time.Millisecond)
	}
	mustCtl(t, s, "workflow", "signal", st.Run, "approval", "--data", `{"approved": false, "by": "alice"}`)
	if st = waitState(t, s, st.Run, "completed"); compactJSON(t, st.OutputJSON) != `{"filled":false,"reason":"not approved"}` {
		t.Errorf("refused run's output %s", st.OutputJSON)
	}
	if out := mustCtl(t, s, "exec", "-c", `import os; print(os.path.exists("/workspace/forms/bob.pdf"))`); strings.TrimSpace(out) != "False" {
		t.Errorf("a refused form was written: %s", out)
	}

	// Another tenant's instance of the forms server sees its own workspace.
	out := mustCtl(t, s, "exec", "--tenant", "other", "-c", `from servers.forms import read_pdf
try:
    print(read_pdf(path="forms/ada.pdf"))
except Exception as e:
    print("refused:", e)`)
	if !strings.Contains(out, "refused:") || !strings.Contains(out, "no such file") || strings.Contains(out, "Lovelace") {
		t.Errorf("tenant other reading default's form: %s", out)
	}
}

// compactJSON returns s re-encoded with its keys in order.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// readFilledPDF reads a PDF form in the default tenant's workspace (through
// a program, as a user would fetch it) and returns its field values as
// pdfcpu reads them.
func readFilledPDF(t *testing.T, s setup, path string) map[string]any {
	t.Helper()
	b64 := strings.TrimSpace(mustCtl(t, s, "exec", "-c", fmt.Sprintf(`import base64
print(base64.b64encode(open(%q, "rb").read()).decode())`, path)))
	filled, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("filled PDF: %v", err)
	}
	model.ConfigPath = "disable"
	g, err := api.ExportForm(bytes.NewReader(filled), filepath.Base(path), model.NewDefaultConfiguration())
	if err != nil || len(g.Forms) != 1 {
		t.Fatalf("read the filled PDF: %v", err)
	}
	got := map[string]any{}
	f := g.Forms[0]
	for _, x := range f.TextFields {
		got[x.Name] = x.Value
	}
	for _, x := range f.ComboBoxes {
		got[x.Name] = x.Value
	}
	for _, x := range f.CheckBoxes {
		got[x.Name] = x.Value
	}
	return got
}
