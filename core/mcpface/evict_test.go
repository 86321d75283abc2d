package mcpface

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
)

// TestIdleSessionEvictedAtCap: a tenant at mcp.max_sessions_per_tenant
// whose clients left without DELETE (as the TypeScript SDK's close does)
// is not locked out: a new session ends the idlest one, which then gets
// 404 (initialize again), while one with a request in flight, or not idle
// long enough, is kept and the new session refused.
func TestIdleSessionEvictedAtCap(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.MaxSessionsPerTenant = 2
		o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}}
	})
	client := func() *rawClient {
		c := newRaw(t, nil, w.url+endpoint.MCPPath)
		c.header.Set("Authorization", "Bearer tok-acme")
		return c
	}
	old, recent := client(), client()
	for _, c := range []*rawClient{old, recent} {
		if st := c.initialize(); st != http.StatusOK {
			t.Fatalf("initialize: %d", st)
		}
	}
	// Both were used just now: neither is idle enough to end.
	if res, body := client().do(http.MethodPost, initBody); res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "max_sessions_per_tenant") {
		t.Fatalf("a third session with both in use: %s %s", res.Status, body)
	}

	w.face.sessions.evictAfter.Store(int64(50 * time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	if res, _ := recent.do(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"ping"}`); res.StatusCode != http.StatusOK {
		t.Fatalf("ping: %s", res.Status)
	}
	third := client()
	if st := third.initialize(); st != http.StatusOK {
		t.Fatalf("a third session with an idle one to end: %d", st)
	}
	if res, body := old.do(http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"ping"}`); res.StatusCode != http.StatusNotFound {
		t.Errorf("the idlest session after it was ended: %s %s, want 404", res.Status, body)
	}
	if res, _ := recent.do(http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); res.StatusCode != http.StatusOK {
		t.Errorf("the recently used session: %s, want it kept", res.Status)
	}
	select {
	case sc := <-w.ended:
		if sc.Session != old.session {
			t.Errorf("ended %s, want %s", sc.Session, old.session)
		}
	case <-time.After(10 * time.Second):
		t.Error("OnSessionEnd did not hear of the ended session")
	}
}

// TestIdlestSkipsBusy: a session with a request in flight, a task running
// or an SSE stream is never the one ended.
func TestIdlestSkipsBusy(t *testing.T) {
	tbl := newSessionTable(Options{})
	tbl.evictAfter.Store(0)
	tbl.add("a", "acme", kindStreamable, "")
	tbl.add("b", "acme", kindStreamable, "")
	tbl.add("s", "acme", kindSSE, "")
	tbl.add("z", "other", kindStreamable, "")
	done := tbl.inUse("a")
	now := time.Now().Add(time.Minute)
	none := func(string) bool { return false }
	if got := tbl.idlest("acme", now, none); got != "b" {
		t.Errorf("idlest with a in use = %q, want b", got)
	}
	if got := tbl.idlest("acme", now, func(id string) bool { return id == "b" }); got != "" {
		t.Errorf("idlest with a in use and b running a task = %q, want none", got)
	}
	done()
	if got := tbl.idlest("acme", now, none); got != "b" {
		t.Errorf("idlest after a's request = %q, want b (used longest ago)", got)
	}
}
