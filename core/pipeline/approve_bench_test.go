package pipeline

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/bridge"
	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/workspace"
)

// BenchmarkApproval is the daemon's own cost of an approval that the user
// grants at once (the form, the tokenized arguments, the record) against
// the same call with no approval rule; a person's answer takes seconds.
func BenchmarkApproval(b *testing.B) {
	ws, err := workspace.New(workspace.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ws.Close() })
	store, err := vault.NewStore(vault.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: emailGuard{}}},
		Policies: map[string]*policy.Policy{"acme": {Approvals: []*policy.Approval{{Tools: []string{"crm/delete_*"}, Timeout: time.Minute}}}}, Vaults: store})
	if err != nil {
		b.Fatal(err)
	}
	x := &Executor{Workspaces: ws, Tools: bridge.New(&echoCatalog{}, nil, bridge.Limits{}), Guard: gr, Approvals: NewApprovals(), Log: hclog.NewNullLogger()}
	user := &formAsker{answer: accept(map[string]any{approveField: true})}
	for _, tool := range []string{"lookup", "delete_contact"} {
		b.Run(tool, func(b *testing.B) {
			for b.Loop() {
				res, err := x.CallTool(context.Background(), ToolCallRequest{Tenant: "acme", Session: "bench", Server: "crm", Tool: tool,
					Arguments: json.RawMessage(`{"who":"ada@example.com"}`), ModelFacing: true, Asker: user})
				if err != nil || res.Error != nil {
					b.Fatal(err, res.Error)
				}
				user.mu.Lock()
				user.asked = user.asked[:0]
				user.mu.Unlock()
			}
		})
	}
}
