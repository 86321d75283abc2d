package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkflowPDFFormApproval runs fill-pdf-form for a tenant whose policy
// holds forms/fill_pdf for approval: the workflow's fill is a tool call
// like a program's, so after the workflow's own listens it waits in
// `cexecctl approvals` (a workflow run has no user to ask) until an
// operator approves it, and a denial fails the run with the denial.
func TestWorkflowPDFFormApproval(t *testing.T) {
	ts := newToolsSetup(t)
	s := ts.setup
	appendConfig(t, s, `
mcp_server "forms" {
  transport = "builtin"
}
tenant "clerk" {
  policy {
    approval {
      tools   = ["forms/fill_pdf"]
      timeout = "2m"
    }
  }
}
`)
	source := filepath.Join(ts.files, "people", "ada.json")
	if err := os.MkdirAll(filepath.Dir(source), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(source, []byte(`{"name": "Ada Lovelace", "email": "ada@example.com", "plan": "premium", "city": "Paris"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	blank, err := os.ReadFile(filepath.Join("..", "examples", "forms", "application.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	startDaemon(t, s)
	requireSandbox(t, s)
	mustCtl(t, s, "exec", "--tenant", "clerk", "-c", fmt.Sprintf(`import base64, os
os.makedirs("/workspace/forms", exist_ok=True)
open("/workspace/forms/application.pdf", "wb").write(base64.b64decode(%q))`, base64.StdEncoding.EncodeToString(blank)))

	run := func(out, verb string) workflowRunJSON {
		t.Helper()
		input := fmt.Sprintf(`{"source": %q, "form": "forms/application.pdf", "out": %q}`, source, out)
		var st workflowRunJSON
		if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--tenant", "clerk", "--detach", "--json", "fill-pdf-form", "--input", input)), &st); err != nil {
			t.Fatal(err)
		}
		for !strings.Contains(mustCtl(t, s, "workflow", "status", "--tenant", "clerk", st.Run), "waiting:  approve for approval") {
			time.Sleep(50 * time.Millisecond)
		}
		mustCtl(t, s, "workflow", "signal", "--tenant", "clerk", st.Run, "approval", "--data", `{"approved": true, "by": "alice"}`)
		id := waitFillApproval(t, s, out)
		if text := mustCtl(t, s, "workflow", "status", "--tenant", "clerk", st.Run); !strings.Contains(text, "state:    running") {
			t.Errorf("while the fill waits for an operator:\n%s", text)
		}
		mustCtl(t, s, "approvals", verb, id)
		for st = workflowStatus(t, s, "--tenant=clerk", st.Run); st.State != "completed" && st.State != "failed"; st = workflowStatus(t, s, "--tenant=clerk", st.Run) {
			time.Sleep(50 * time.Millisecond)
		}
		return st
	}

	if st := run("forms/ada.pdf", "approve"); st.State != "completed" || !strings.Contains(st.OutputJSON, `"filled":true`) {
		t.Fatalf("approved fill: %s %s %s", st.State, st.OutputJSON, st.ErrorJSON)
	}
	st := run("forms/denied.pdf", "deny")
	if st.State != "failed" || !strings.Contains(st.ErrorJSON, "approval: forms/fill_pdf was not called: denied by an operator") {
		t.Errorf("denied fill: %s %s", st.State, st.ErrorJSON)
	}
	if out := mustCtl(t, s, "exec", "--tenant", "clerk", "-c", `import os; print(os.path.exists("/workspace/forms/ada.pdf"), os.path.exists("/workspace/forms/denied.pdf"))`); strings.TrimSpace(out) != "True False" {
		t.Errorf("filled forms (approved, denied): %s", out)
	}
}

// waitFillApproval polls `cexecctl approvals ls` until tenant clerk's
// forms/fill_pdf of out waits, and returns its id.
func waitFillApproval(t *testing.T, s setup, out string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r struct {
			Approvals []struct {
				ID            string `json:"id"`
				Tenant        string `json:"tenant"`
				Server        string `json:"server"`
				Tool          string `json:"tool"`
				ArgumentsJSON string `json:"arguments_json"`
			} `json:"approvals"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "approvals", "ls", "--json")), &r); err != nil {
			t.Fatal(err)
		}
		for _, a := range r.Approvals {
			if a.Tenant == "clerk" && a.Server+"/"+a.Tool == "forms/fill_pdf" && strings.Contains(a.ArgumentsJSON, out) {
				return a.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending approval of forms/fill_pdf after 60s: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
