package mcpface

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/api/endpoint"
)

// Token maps a bearer token to a tenant.
type Token struct {
	// Token is the secret clients send as "Authorization: Bearer <token>".
	Token  string
	Tenant string
}

// tokenEntry keeps only a digest: comparing digests of equal length in
// constant time leaks neither the tokens nor their lengths.
type tokenEntry struct {
	sum    [sha256.Size]byte
	tenant string
}

type ctxKey struct{}

// requestInfo is what the transport learned about a request.
type requestInfo struct {
	tenant string
	// auth is how a request opening a session authenticated (Auth*), ""
	// on other requests.
	auth string
	// reservation is the session lease admit reserved for the session
	// this request opens, or "".
	reservation string
}

func withRequest(ctx context.Context, ri requestInfo) context.Context {
	return context.WithValue(ctx, ctxKey{}, ri)
}

func authFrom(ctx context.Context) string {
	ri, _ := ctx.Value(ctxKey{}).(requestInfo)
	return ri.auth
}

func reservationFrom(ctx context.Context) string {
	ri, _ := ctx.Value(ctxKey{}).(requestInfo)
	return ri.reservation
}

// How a session's opening request authenticated (OnSessionStart).
const (
	// AuthSocket: the daemon's private unix socket (its mode is the check).
	AuthSocket = "socket"
	// AuthLoopback: TCP on loopback without tokens configured.
	AuthLoopback = "loopback"
	// AuthToken: a static bearer token of mcp.tokens.
	AuthToken = "token"
	// AuthOAuth: a JWT access token of mcp.oauth's issuer.
	AuthOAuth = "oauth"
)

// authOf says how an admitted request authenticated; only requests that
// open a session ask.
func (f *Face) authOf(r *http.Request, kind listenerKind) string {
	switch {
	case kind == viaUnix:
		return AuthSocket
	case !f.hasAuth():
		return AuthLoopback
	}
	if token, ok := bearer(r); ok {
		if _, ok := f.lookupToken(token); ok {
			return AuthToken
		}
	}
	return AuthOAuth
}

func tenantFrom(ctx context.Context) (string, bool) {
	ri, ok := ctx.Value(ctxKey{}).(requestInfo)
	return ri.tenant, ok && ri.tenant != ""
}

// listenerKind is how a request reached the face.
type listenerKind int

const (
	viaUnix     listenerKind = iota + 1 // the daemon's private socket
	viaLoopback                         // TCP on a loopback address
	viaNetwork                          // TCP on any other address
)

func kindOf(r *http.Request) listenerKind {
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	switch {
	case addr == nil:
		// Only handlers driven without a server (tests with
		// httptest.NewRecorder) get here; treat them as the strictest case.
		return viaNetwork
	case addr.Network() == "unix":
		return viaUnix
	case isLoopbackHost(addr.String()):
		return viaLoopback
	}
	return viaNetwork
}

// isLoopbackHost reports whether a host or host:port names a loopback
// interface: "localhost", 127.0.0.0/8 or ::1.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// normalizeOrigin turns an origin or URL into "scheme://host[:port]" in lower
// case, or fails for anything that is not an http(s) origin.
func normalizeOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("invalid origin %q: want scheme://host[:port], e.g. https://app.example.com", s)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// originAllowed applies the DNS rebinding rules to an Origin header: absent
// (non-browser clients), on the allow list, or, on a loopback listener, the
// face's own origin (the request's Host, which admit checked is local). A
// localhost origin is not trusted by itself: any local web page has one.
func (f *Face) originAllowed(origin, host string, kind listenerKind) bool {
	if origin == "" {
		return true
	}
	norm, err := normalizeOrigin(origin)
	if err != nil {
		return false
	}
	_, originHost, _ := strings.Cut(norm, "://")
	return f.origins[norm] || (kind == viaLoopback && originHost == strings.ToLower(host))
}

// hostAllowed checks the Host header of a request that came in on a
// loopback address: a DNS rebinding attack arrives there with the
// attacker's host name.
func (f *Face) hostAllowed(host string) bool {
	if isLoopbackHost(host) {
		return true
	}
	h := strings.ToLower(host)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return f.hosts[h]
}

func (f *Face) lookupToken(token string) (string, bool) {
	sum := sha256.Sum256([]byte(token))
	tenant, found := "", 0
	// Every entry is compared, so the time taken says nothing about which
	// one matched.
	for _, e := range f.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], e.sum[:])
		if eq == 1 {
			tenant = e.tenant
		}
		found |= eq
	}
	return tenant, found == 1
}

// challenge is the WWW-Authenticate value of a 401 (or an OAuth 403): with
// an identity provider it points the client at the protected resource
// metadata (RFC 9728), and code and desc say what was wrong with the token.
func (f *Face) challenge(code, desc string) string {
	if f.oauth == nil {
		return `Bearer realm="cexec"`
	}
	return f.oauth.challenge(code, desc)
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}

// admit runs before mcp-go sees a request: the body limit, DNS rebinding
// checks (Host on loopback listeners, Origin everywhere), the tenant (bearer
// token over TCP, the tenant header on the private unix socket), that a
// session id belongs to that tenant and is live, and the tenant's session
// cap.
func (f *Face) admit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > f.o.MaxRequestBody {
			f.deny(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d (mcp.max_request_body)", r.ContentLength, f.o.MaxRequestBody))
			return
		}
		kind := kindOf(r)
		if kind == viaLoopback && !f.hostAllowed(r.Host) {
			f.deny(w, r, http.StatusForbidden, fmt.Sprintf("Host %q is not a local name (DNS rebinding?); to serve it, add its origin to mcp.allowed_origins", r.Host))
			return
		}
		origin := r.Header.Get("Origin")
		if !f.originAllowed(origin, r.Host, kind) {
			f.deny(w, r, http.StatusForbidden, fmt.Sprintf("Origin %q is not allowed; add it to mcp.allowed_origins", origin))
			return
		}
		if origin != "" && allowCORS(w, r, origin) {
			return
		}
		tenant, status, msg := f.tenantOf(w, r, kind)
		if status != 0 {
			if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
				w.Header().Set("WWW-Authenticate", f.challenge("", ""))
			}
			f.deny(w, r, status, msg)
			return
		}
		if status, msg := f.checkSession(r, tenant); status != 0 {
			f.deny(w, r, status, msg)
			return
		}
		ri := requestInfo{tenant: tenant}
		if id := sessionIDOf(r); id != "" {
			defer f.sessions.inUse(id)()
		}
		if opensSession(r) {
			hold := r.Method == http.MethodPost
			ok, reservation, done := f.sessions.admit(r.Context(), tenant, f.o.MaxSessionsPerTenant, hold)
			if !ok && f.evictIdle(tenant) {
				done()
				ok, reservation, done = f.sessions.admit(r.Context(), tenant, f.o.MaxSessionsPerTenant, hold)
			}
			defer done()
			if !ok {
				f.deny(w, r, http.StatusTooManyRequests, fmt.Sprintf("tenant %q has %d MCP sessions open, the limit (mcp.max_sessions_per_tenant), all in use in the last %s or running tasks; end one (DELETE) or let it time out", tenant, f.o.MaxSessionsPerTenant, minIdleToEvict))
				return
			}
			ri.auth, ri.reservation = f.authOf(r, kind), reservation
		}
		if !f.limitBody(w, r) {
			return
		}
		next.ServeHTTP(w, r.WithContext(withRequest(r.Context(), ri)))
	})
}

// limitBody holds the body to mcp.max_request_body (admit refused a longer
// Content-Length already). A body of unknown length (chunked) is read here,
// so that one over the limit gets 413 too rather than mcp-go's parse
// error; mcp-go reads every body whole anyway. It reports whether the
// request may go on.
func (f *Face) limitBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	r.Body = http.MaxBytesReader(w, r.Body, f.o.MaxRequestBody)
	if r.ContentLength >= 0 {
		return true
	}
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		f.deny(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the limit of %d bytes (mcp.max_request_body)", f.o.MaxRequestBody))
		return false
	case err != nil:
		f.deny(w, r, http.StatusBadRequest, fmt.Sprintf("read request body: %v", err))
		return false
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return true
}

// opensSession reports whether a request would begin a session: a POST
// without a session id (initialize) or an SSE stream.
func opensSession(r *http.Request) bool {
	switch r.URL.Path {
	case endpoint.MCPPath:
		return r.Method == http.MethodPost && r.Header.Get(server.HeaderKeySessionID) == ""
	case endpoint.SSEPath:
		return r.Method == http.MethodGet
	}
	return false
}

// allowCORS lets a browser page of an allowed origin use the endpoints: it
// answers the preflight (which carries no credentials, so it comes before
// the token check) and marks real responses as readable by that origin. It
// reports whether it answered the request.
func allowCORS(w http.ResponseWriter, r *http.Request, origin string) bool {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, "+endpoint.TenantHeader)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// deny answers and closes the connection, so a client that is refused
// cannot keep it parked.
func (f *Face) deny(w http.ResponseWriter, r *http.Request, status int, msg string) {
	f.log.Debug("refused request", "method", r.Method, "path", r.URL.Path, "status", status, "reason", msg)
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
}

// tenantOf decides the tenant of a request, or the status and message to
// refuse it with; a refused access token's challenge goes into w's header.
func (f *Face) tenantOf(w http.ResponseWriter, r *http.Request, kind listenerKind) (string, int, string) {
	asked := r.Header.Get(endpoint.TenantHeader)
	if kind == viaUnix {
		// The socket is only reachable by the daemon's user, who may act
		// as any tenant.
		tenant := asked
		if tenant == "" {
			tenant = f.o.DefaultTenant
			// mcp-go's client sends the DELETE that ends its session
			// without the headers of its other requests; the session id
			// names the tenant instead, which this user may act as anyway.
			// Without this the session lived on until the idle sweep and
			// counted against the tenant's session cap.
			if owner, ok := f.sessions.owner(sessionIDOf(r)); ok {
				tenant = owner
			}
		}
		if !tenantRE.MatchString(tenant) {
			return "", http.StatusBadRequest, fmt.Sprintf("invalid tenant %q: use 1-64 characters of a-z, 0-9, _ and -", tenant)
		}
		return tenant, 0, ""
	}
	if !f.hasAuth() {
		if kind != viaLoopback {
			return "", http.StatusForbidden, "MCP over a non-loopback address needs bearer tokens (mcp.tokens in cexec.hcl)"
		}
		if asked != "" && asked != f.o.DefaultTenant {
			return "", http.StatusForbidden, fmt.Sprintf("choosing tenant %q over TCP needs a bearer token mapped to it (mcp.tokens in cexec.hcl)", asked)
		}
		return f.o.DefaultTenant, 0, ""
	}
	token, ok := bearer(r)
	if !ok {
		return "", http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token>"
	}
	tenant, ok := f.lookupToken(token)
	if !ok && f.oauth == nil {
		return "", http.StatusUnauthorized, "invalid bearer token"
	}
	if !ok {
		var refused *tokenRefusal
		if tenant, refused = f.oauth.verify(r.Context(), token); refused != nil {
			if refused.code != "" {
				w.Header().Set("WWW-Authenticate", f.challenge(refused.code, refused.msg))
			}
			return "", refused.status, refused.msg
		}
	}
	if asked != "" && asked != tenant {
		return "", http.StatusForbidden, fmt.Sprintf("this token belongs to tenant %q, not %q", tenant, asked)
	}
	return tenant, 0, ""
}

// sessionIDOf is the MCP session a request names, or "".
func sessionIDOf(r *http.Request) string {
	switch r.URL.Path {
	case endpoint.MCPPath:
		return r.Header.Get(server.HeaderKeySessionID)
	case endpoint.MessagePath:
		return r.URL.Query().Get("sessionId")
	}
	return ""
}

// checkSession refuses a session id of another tenant as if it did not
// exist, and one that ended: mcp-go checks POSTs itself but would open a GET
// stream for any id, and would clean up another tenant's session on DELETE.
func (f *Face) checkSession(r *http.Request, tenant string) (int, string) {
	var id string
	switch r.URL.Path {
	case endpoint.MCPPath:
		id = r.Header.Get(server.HeaderKeySessionID)
		if id == "" {
			if r.Method == http.MethodGet || r.Method == http.MethodDelete {
				return http.StatusBadRequest, "missing " + server.HeaderKeySessionID + " header: initialize a session first"
			}
			return 0, ""
		}
	case endpoint.MessagePath:
		id = r.URL.Query().Get("sessionId")
		if id == "" {
			return 0, ""
		}
	default:
		return 0, ""
	}
	owner, ok := f.sessions.owner(id)
	if !ok {
		return f.sessions.elsewhere(r.Context(), id)
	}
	if owner != tenant {
		return http.StatusNotFound, "session not found: it ended or never existed; initialize a new one"
	}
	return 0, ""
}

// Handler returns the face's HTTP handler: streamable HTTP on
// endpoint.MCPPath and, when Options.SSE is set, HTTP+SSE on
// endpoint.SSEPath and endpoint.MessagePath. How a request is
// authenticated depends on the listener it arrived on (see Serve), so the
// handler must be served by an http.Server (which records the local
// address), not called directly.
func (f *Face) Handler() http.Handler { return f.handler }

// Serve serves the face on ln until ctx ends, then shuts down: it stops
// accepting, closes every session's streams and waits for in-flight calls
// up to grace. On a unix socket the tenant comes from the
// endpoint.TenantHeader header (the socket must be private to the daemon's
// user, as ListenUnix makes it); on TCP from the bearer token. Serve refuses
// a non-loopback TCP listener when no tokens are configured.
func (f *Face) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	if ln.Addr().Network() != "unix" && !isLoopbackHost(ln.Addr().String()) && !f.hasAuth() {
		return fmt.Errorf("serve mcp on %s: %w", ln.Addr(), ErrNoAuth)
	}
	if ln.Addr().Network() != "unix" {
		ln = newCapListener(ln, f.o.MaxConnections, f.o.MaxConnectionsPerPeer, func(peer netip.Addr) {
			f.log.Debug("refused connection over the cap", "peer", peer, "max_connections", f.o.MaxConnections, "max_connections_per_peer", f.o.MaxConnectionsPerPeer)
		})
	}
	// net/http lifts ReadTimeout's deadline once a request's body is read,
	// so long calls and GET and SSE streams outlive it; a WriteTimeout
	// would end them, so there is none.
	hs := &http.Server{
		Handler:           f.handler,
		ReadHeaderTimeout: f.o.ReadHeaderTimeout,
		ReadTimeout:       f.o.ReadTimeout,
		IdleTimeout:       f.o.IdleTimeout,
		ErrorLog:          f.log.StandardLogger(nil),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve mcp on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	// Open GET and SSE streams never end by themselves.
	f.closeStreams(sctx)
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		f.log.Warn("mcp calls still running at shutdown; closing them", "grace", grace)
		err = hs.Close()
	}
	<-served
	return err
}

// closeStreams ends every session's streams and the idle sweeper.
func (f *Face) closeStreams(ctx context.Context) {
	if err := f.http.Shutdown(ctx); err != nil {
		f.log.Warn("closing mcp sessions", "error", err)
	}
	if f.sse != nil {
		f.sse.CloseSessions()
	}
}

// ErrNoAuth is returned when asked to serve MCP on a non-loopback address
// without bearer tokens.
var ErrNoAuth = errors.New("refusing to serve MCP on a non-loopback address without auth: configure mcp.tokens or mcp.oauth")

// CheckListen reports whether addr (host:port) may be served with or
// without tokens: a non-loopback address needs them.
func CheckListen(addr string, haveTokens bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid mcp listen address %q: %w", addr, err)
	}
	if !haveTokens && !isLoopbackHost(host) {
		return fmt.Errorf("mcp listen address %q: %w", addr, ErrNoAuth)
	}
	return nil
}

// ListenTCP listens on addr after CheckListen, so a non-loopback address
// without tokens never opens.
func (f *Face) ListenTCP(addr string) (net.Listener, error) {
	if err := CheckListen(addr, f.hasAuth()); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for mcp on %s: %w", addr, err)
	}
	return ln, nil
}

// ListenUnix creates the unix socket at path with mode 0600, replacing a
// stale one. Its directory must already be private (0700), as the
// daemon's socket directory is, so there is no moment where others could
// connect.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale mcp socket %s: %w", path, err)
	}
	st, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("mcp socket directory: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("mcp socket directory %s is accessible to others (mode %o); it must be 0700", filepath.Dir(path), st.Mode().Perm())
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen for mcp on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("chmod mcp socket %s: %w", path, err)
	}
	return ln, nil
}
