package mcpface

import (
	"context"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// minIdleToEvict is how long a session must have had no request before a
// new session of its tenant may end it to stay under
// mcp.max_sessions_per_tenant: one just opened is about to be used.
const minIdleToEvict = 10 * time.Second

// inUse marks a request of session id in flight, for eviction to pass it
// over, and returns what to call when it is served.
func (t *sessionTable) inUse(id string) func() {
	t.mu.Lock()
	e, ok := t.live[id]
	if ok {
		e.inflight++
		e.lastUsed = time.Now()
		t.live[id] = e
	}
	t.mu.Unlock()
	if !ok {
		return func() {}
	}
	return func() {
		t.mu.Lock()
		if e, ok := t.live[id]; ok {
			e.inflight--
			e.lastUsed = time.Now()
			t.live[id] = e
		}
		t.mu.Unlock()
	}
}

// idlest returns tenant's streamable session that has gone longest
// without a request, none in flight for at least evictAfter
// (minIdleToEvict; tests shorten it), and that busy does not claim; ""
// when there is none.
func (t *sessionTable) idlest(tenant string, now time.Time, busy func(id string) bool) string {
	after := time.Duration(t.evictAfter.Load())
	t.mu.Lock()
	defer t.mu.Unlock()
	var id string
	var oldest time.Time
	for sid, e := range t.live {
		if e.tenant != tenant || e.kind != kindStreamable || e.inflight > 0 || now.Sub(e.lastUsed) < after {
			continue
		}
		if id == "" || e.lastUsed.Before(oldest) {
			id, oldest = sid, e.lastUsed
		}
	}
	if id != "" && busy(id) {
		return ""
	}
	return id
}

// evictIdle ends tenant's idlest session, as a DELETE would, so that a new
// one fits under mcp.max_sessions_per_tenant: clients that leave without a
// DELETE (the TypeScript SDK's close sends none) would otherwise lock their
// tenant out until the idle timeout. A session running a task is kept. It
// reports whether one ended.
func (f *Face) evictIdle(tenant string) bool {
	id := f.sessions.idlest(tenant, time.Now(), f.tasks.running)
	if id == "" {
		return false
	}
	// Through mcp-go's own DELETE, which ends the session here (the
	// session table is its session id manager) and frees its state there.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/", nil)
	if err != nil {
		f.log.Error("end an idle session", "tenant", tenant, "session", id, "error", err)
		return false
	}
	req.Header.Set(server.HeaderKeySessionID, id)
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20251125) // a revision with sessions
	var w statusOnly
	f.http.ServeHTTP(&w, req)
	if _, live := f.sessions.owner(id); live {
		f.log.Warn("idle session not ended to make room", "tenant", tenant, "session", id, "status", w.code)
		return false
	}
	f.log.Info("ended the tenant's idlest session to make room under mcp.max_sessions_per_tenant", "tenant", tenant, "session", id)
	return true
}

// statusOnly is the response writer of a request cexecd makes to itself:
// only the status matters.
type statusOnly struct {
	header http.Header
	code   int
}

func (w *statusOnly) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *statusOnly) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *statusOnly) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
