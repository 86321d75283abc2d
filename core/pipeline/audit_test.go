package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/bridge"
	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/workspace"
)

// TestAuditOfCalls: an allowed call and a denied one through a real
// bridge, guard layer and audit log land in the tenant's audit log as
// executions, tool calls and a policy denial, with argument hashes and
// never the arguments, in a chain that verifies.
func TestAuditOfCalls(t *testing.T) {
	data := t.TempDir()
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Policies: map[string]*policy.Policy{"acme": {Deny: []string{"crm/delete_*"}, DenyCode: []*regexp.Regexp{regexp.MustCompile(`subprocess`)}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	log := audit.New(audit.Options{Tenants: ws, RotateSize: 1 << 20, Keep: 2})
	x := &Executor{Workspaces: ws, Tools: bridge.New(&echoCatalog{}, nil, bridge.Limits{}), Guard: gr, Audit: log}
	for _, tool := range []string{"lookup", "delete_contact"} {
		if _, err := x.CallTool(context.Background(), ToolCallRequest{Tenant: "acme", Session: "s1", Server: "crm", Tool: tool,
			Arguments: json.RawMessage(`{"who":"Ada Lovelace"}`), ModelFacing: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Code the policy refuses never runs (no sandbox is needed).
	if res, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: "acme", Session: "s1", Code: "import subprocess"}); err != nil || res.Error == nil || res.Error.Type != TypeDenied {
		t.Fatalf("denied code: %+v, %v", res, err)
	}
	b, err := os.ReadFile(filepath.Join(data, "tenants", "acme", "audit", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Type, Outcome, Server, Tool, Actor string
			Args                               string `json:"args_sha256"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type+":"+e.Outcome)
		if e.Type == audit.TypeToolCall && (e.Args != audit.Hash([]byte(`{"who":"Ada Lovelace"}`)) || e.Actor != "agent") {
			t.Errorf("tool call line %s: want the arguments' sha256 and actor agent", line)
		}
	}
	want := "execution:ok tool_call:ok execution:denied tool_call:denied policy_denial:denied execution:denied policy_denial:denied"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("audit events %q, want %q", got, want)
	}
	if strings.Contains(string(b), "Ada") {
		t.Error("the audit log holds an argument value")
	}
	rep, err := log.Verify(context.Background(), "acme")
	if err != nil || rep.Broken != nil || rep.Lines != 7 {
		t.Errorf("verify: %+v, %v", rep, err)
	}
}

// TestUpstreamElicitationAudited: an upstream's question relayed to the
// user is recorded in the tenant's audit log with the server, the mode and
// the user's action, never the question or the answer.
func TestUpstreamElicitationAudited(t *testing.T) {
	data := t.TempDir()
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	log := audit.New(audit.Options{Tenants: ws, RotateSize: 1 << 20, Keep: 2})
	x := &Executor{Workspaces: ws, Audit: log}
	user := &formAsker{answer: accept(map[string]any{"pin": "4711"})}
	ask := &upstreamAsker{a: user, audit: x.Audit, tenant: "acme", session: "s1"}
	if _, err := ask.Elicit(context.Background(), "bank", mcp.ElicitationParams{Message: "Your secret word?"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(data, "tenants", "acme", "audit", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(b))
	var e audit.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	if e.Type != audit.TypeElicitation || e.Server != "bank" || e.Outcome != "accept" || e.Session != "s1" || e.Detail["mode"] != "form" {
		t.Errorf("audit event %s", line)
	}
	if strings.Contains(line, "secret word") || strings.Contains(line, "4711") {
		t.Errorf("the audit line holds the question or the answer: %s", line)
	}
}
