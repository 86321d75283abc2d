package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi/codegen"
)

// TestTaskRequestTokenized checks that nothing of the tenant's data reaches
// a generator raw: the workspace's file names, the skills' descriptions and
// code and the tools' texts are tokenized in the session's vault, so a
// program written with a token gets the real value back when it runs.
func TestTaskRequestTokenized(t *testing.T) {
	const email, phone = "ann@example.com", "555-123-4567"
	f := newFixture(t, workspace.Quota{})
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := guard.New(guard.Options{Guards: []guard.Named{{Name: "pii", Plugin: piiGuard{detects: new(atomic.Int32)}}},
		Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	f.tasks.Guard = gr
	tools := toolsOf("crm", "lookup")
	tools[0].Description = "Look a customer up; support: " + email
	tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"who":{"type":"string","default":"` + phone + `"}}}`)
	f.tasks.Catalog = &fakeCatalog{tools: tools}
	tenant, err := f.ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.SaveSkill(context.Background(), "call_ann", "Calls Ann at "+phone,
		"def run():\n    return '"+email+"'\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tenant.WorkspaceDir(), email+".csv"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.search.ids = []string{"skills/call_ann", "crm/lookup"}
	g := f.gen("llm", func(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
		return codegen.GenerateResponse{Code: "print(open('/workspace/" + req.WorkspaceListing[0] + "').read())"}, nil
	})
	res, err := f.tasks.ExecuteTask(context.Background(), TaskRequest{Tenant: "acme", Task: "read the file", ModelFacing: true})
	if err != nil {
		t.Fatal(err)
	}
	reqs := g.requests()
	if len(reqs) == 0 {
		t.Fatalf("no request reached the generator: %+v", res.Attempts)
	}
	seen, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{email, phone} {
		if strings.Contains(string(seen), raw) {
			t.Errorf("the generator saw %q: %s", raw, seen)
		}
	}
	req := reqs[0]
	if len(req.Skills) != 1 || req.Skills[0].Name != "call_ann" || !strings.Contains(req.Skills[0].Description, "[PHONE_") ||
		!strings.Contains(req.Skills[0].Source, "[EMAIL_") || len(req.Tools) != 1 || req.Tools[0].ID != "crm/lookup" ||
		!strings.Contains(req.Tools[0].Description, "[EMAIL_") || !json.Valid(req.Tools[0].InputSchema) ||
		!strings.HasPrefix(req.WorkspaceListing[0], "[EMAIL_") {
		t.Errorf("request %s", seen)
	}
	// The program written with the token opens the real file.
	gs, err := gr.Open("acme", res.Session)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gs.Close() }()
	real, err := gs.Vault().UntokenizePython(f.runner.reqs[0].Code)
	if err != nil || real != "print(open('/workspace/"+email+".csv').read())" {
		t.Errorf("the program runs as %q (%v)", real, err)
	}
}
