package mcpface

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/server"
)

// sessionKind tells the transports' sessions apart: a streamable HTTP
// session lives until DELETE or the idle timeout, an SSE session as long as
// its stream.
type sessionKind int

const (
	kindStreamable sessionKind = iota + 1
	kindSSE
)

type sessionEntry struct {
	tenant string
	kind   sessionKind
	// lastUsed and inflight say how idle the session is (evict.go).
	lastUsed time.Time
	inflight int
}

// sessionTable binds every MCP session to the tenant that created it, so a
// session id is worthless under another tenant's token, and reports ended
// sessions. It is the streamable HTTP server's session id manager: an id is
// live from initialize until DELETE or the idle sweep, then dead for good.
type sessionTable struct {
	mu   sync.Mutex
	live map[string]sessionEntry
	// perTenant counts live sessions for the per-tenant cap.
	perTenant map[string]int
	// opening serialises a tenant's session openings (striped by tenant)
	// when there are no leases, so that two cannot both pass the cap
	// (admit).
	opening [32]sync.Mutex
	onEnd   func(Scope)
	onStart func(Scope, string)
	// replica prefixes new ids ("a.<id>"); leases, when set, records
	// which replica serves each session.
	replica string
	leases  SessionLeases
	log     hclog.Logger
	// evictAfter is minIdleToEvict, in nanoseconds.
	evictAfter atomic.Int64
}

func newSessionTable(o Options) *sessionTable {
	t := &sessionTable{live: map[string]sessionEntry{}, perTenant: map[string]int{}, onEnd: o.OnSessionEnd,
		onStart: o.OnSessionStart, replica: o.Replica, leases: o.Leases, log: o.Logger}
	t.evictAfter.Store(int64(minIdleToEvict))
	return t
}

// newSessionID returns an id that sorts by creation, carries 128 random
// bits and is a valid workspace session id, so the MCP session id can name
// the cexec session as it is. A replica's ids start with its id and a dot,
// the hint proxies route on.
func (t *sessionTable) newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
	if t.replica != "" {
		id = t.replica + "." + id
	}
	return id
}

// started reports a new session to onStart.
func (t *sessionTable) started(id, tenant, auth string) {
	if t.onStart != nil {
		t.onStart(Scope{Tenant: tenant, Session: id}, auth)
	}
}

// add records a new session; reservation is the lease admit reserved
// for it, or "".
func (t *sessionTable) add(id, tenant string, kind sessionKind, reservation string) {
	t.mu.Lock()
	if _, ok := t.live[id]; !ok {
		t.perTenant[tenant]++
	}
	t.live[id] = sessionEntry{tenant: tenant, kind: kind, lastUsed: time.Now()}
	t.mu.Unlock()
	t.claim(tenant, id, reservation)
}

// count is the number of live sessions of tenant.
func (t *sessionTable) count(tenant string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.perTenant[tenant]
}

// owner returns the tenant of a live session.
func (t *sessionTable) owner(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.live[id]
	return e.tenant, ok
}

// end forgets a session of the given kind (0: any) and reports it.
func (t *sessionTable) end(id string, kind sessionKind) {
	t.mu.Lock()
	e, ok := t.live[id]
	if ok && (kind == 0 || e.kind == kind) {
		delete(t.live, id)
		if t.perTenant[e.tenant]--; t.perTenant[e.tenant] <= 0 {
			delete(t.perTenant, e.tenant)
		}
	} else {
		ok = false
	}
	t.mu.Unlock()
	if ok {
		t.release(id)
	}
	if ok && t.onEnd != nil {
		t.onEnd(Scope{Tenant: e.tenant, Session: id})
	}
}

func (t *sessionTable) byTenant() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.perTenant)
}

func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the
// manager it returns creates sessions for the request's tenant. A nil
// request (the idle sweeper, shutdown) gets a manager that can only end
// sessions.
func (t *sessionTable) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	m := sessionManager{t: t}
	if r != nil {
		m.tenant, _ = tenantFrom(r.Context())
		m.auth = authFrom(r.Context())
		m.reservation = reservationFrom(r.Context())
	}
	return m
}

type sessionManager struct {
	t           *sessionTable
	tenant      string
	auth        string
	reservation string
}

var errUnknownSession = errors.New("unknown or ended session")

func (m sessionManager) Generate() string {
	id := m.t.newSessionID()
	m.t.add(id, m.tenant, kindStreamable, m.reservation)
	m.t.started(id, m.tenant, m.auth)
	return id
}

func (m sessionManager) Validate(id string) (bool, error) {
	owner, ok := m.t.owner(id)
	if !ok || (m.tenant != "" && owner != m.tenant) {
		return false, errUnknownSession
	}
	return false, nil
}

func (m sessionManager) Terminate(id string) (bool, error) {
	m.t.end(id, kindStreamable)
	return false, nil
}

// sessionIDRE is the workspace's session id rule: 1-128 characters of
// A-Z, a-z, 0-9, ".", "_" and "-", starting with a letter or digit.
var sessionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func validSessionID(id string) bool {
	return sessionIDRE.MatchString(id) && !strings.Contains(id, "..")
}
