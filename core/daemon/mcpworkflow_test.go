package daemon

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/workflow"
	"github.com/cexec/cexec/core/workspace"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

// runIDGuard flags workflow run ids, as the pii guard's high-entropy
// secret rule does with most of them (20261127T044503Z-d888c8dd).
type runIDGuard struct{ emailGuard }

var runIDRE = regexp.MustCompile(`\d{8}T\d{6}Z-[0-9a-f]{8}`)

func (runIDGuard) Detect(_ context.Context, req guardapi.DetectRequest) ([]guardapi.Span, error) {
	var out []guardapi.Span
	for _, m := range runIDRE.FindAllStringIndex(req.Text, -1) {
		out = append(out, guardapi.Span{Start: m[0], End: m[1], Type: "SECRET", Score: 1})
	}
	return out, nil
}

// TestWorkflowViewUntokenizesRun: the run the workflow tool names may be
// the token the agent was shown for it. Run ids are random enough that the
// pii guard takes most for secrets, so the agent saw run [SECRET_1], and
// status and signal with it failed with "invalid run id".
func TestWorkflowViewUntokenizesRun(t *testing.T) {
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := guard.New(guard.Options{Guards: []guard.Named{{Name: "secrets", Plugin: runIDGuard{}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.New(workspace.Options{DataDir: t.TempDir(), Tenants: []*config.Tenant{{ID: "default"}}, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	eng := workflow.NewEmbedded(workflow.Options{Journals: ws, Log: hclog.NewNullLogger()})
	t.Cleanup(eng.Close)
	v := workflowView{svc: &services{workflows: eng}, pii: &sessionVaults{gr: gr, open: map[vaultOwner]*openVault{}}}
	ctx := context.Background()
	sc := mcpface.Scope{Tenant: "default", Session: "s1"}
	const run = "20261127T044503Z-d888c8dd"
	tok, err := v.pii.Tokenize(ctx, sc, run)
	if err != nil || tok == run {
		t.Fatalf("tokenize %s: %q, %v", run, tok, err)
	}
	for name, call := range map[string]func() error{
		"status": func() error { _, err := v.WorkflowStatus(ctx, sc, tok); return err },
		"signal": func() error { _, err := v.SignalWorkflow(ctx, sc, tok, "approval", nil); return err },
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), run) || strings.Contains(err.Error(), "invalid run id") {
			t.Errorf("%s of run %s: %v; want the run looked up (it does not exist)", name, tok, err)
		}
	}
}
