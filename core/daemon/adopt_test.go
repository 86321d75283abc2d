package daemon

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/mcpface"
)

// leaseLog is a store whose every lease is of a dead replica: adoption
// always succeeds. It records what is adopted and released.
type leaseLog struct {
	mu                sync.Mutex
	adopted, released []string
}

func (l *leaseLog) AdoptSession(_ context.Context, _, session string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.adopted = append(l.adopted, session)
	return true, nil
}

func (l *leaseLog) ReleaseSession(_ context.Context, session string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, session)
	return nil
}

// clientSession is an MCP session as mcp-go puts it in a request's context.
type clientSession string

func (clientSession) Initialize()                                         {}
func (clientSession) Initialized() bool                                   { return true }
func (clientSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (c clientSession) SessionID() string                                 { return string(c) }

// TestAdoptedVaultReleased: two MCP sessions on this replica continue the
// session of a replica that died; its vault stays open while either does,
// and when the last ends the vault closes and the adopted lease goes, so it
// counts against mcp.max_sessions_per_tenant no longer.
func TestAdoptedVaultReleased(t *testing.T) {
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := guard.New(guard.Options{Guards: []guard.Named{{Name: "email", Plugin: emailGuard{}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	leases := &leaseLog{}
	v := &sessionVaults{gr: gr, adopter: newSessionAdopter(leases, hclog.NewNullLogger()), open: map[vaultOwner]*openVault{}}
	mcpServer := server.NewMCPServer("test", "1")
	old := mcpface.Scope{Tenant: "default", Session: "old"}
	for _, id := range []string{"new1", "new2"} {
		ctx := mcpServer.WithContext(context.Background(), clientSession(id))
		if got, err := v.Tokenize(ctx, old, "mail ada@example.com"); err != nil || got != "mail [EMAIL_1]" {
			t.Fatalf("%s continuing old: %q, %v", id, got, err)
		}
	}
	v.end(mcpface.Scope{Tenant: "default", Session: "new1"})
	if _, open := v.open[vaultOwner{tenant: "default", session: "old"}]; !open || len(leases.released) != 0 {
		t.Errorf("after one of two sessions ended: vault open %v, released %q; want open, none", open, leases.released)
	}
	v.end(mcpface.Scope{Tenant: "default", Session: "new2"})
	if _, open := v.open[vaultOwner{tenant: "default", session: "old"}]; open || !slices.Equal(leases.released, []string{"old"}) {
		t.Errorf("after both ended: vault open %v, released %q; want closed and old released", open, leases.released)
	}
}
