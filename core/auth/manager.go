package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
)

// expirySkew refreshes a token this long before it expires, so a request
// does not leave with a token that dies on the way.
const expirySkew = 30 * time.Second

// LoginTimeout bounds how long a sign-in waits for the browser's redirect.
const LoginTimeout = 10 * time.Minute

// Manager signs servers' requests and runs sign-ins. Safe for concurrent use.
type Manager struct {
	// cfg is the config in effect: a reload replaces it (SetConfig), so
	// servers it adds or changes are the ones signed in to.
	cfg   atomic.Pointer[config.Config]
	store *Store
	hc    *http.Client
	log   hclog.Logger

	mu    sync.Mutex
	keys  map[Key]*keyState
	onNew []func(server, tenant string)
}

// keyState is what the manager remembers of one (tenant, server) between
// requests.
type keyState struct {
	mu        sync.Mutex // held while refreshing or fetching a token
	challenge challenge  // the server's last 401 or 403
}

// NewManager returns a manager keeping tokens in store. hc makes the
// requests to authorization servers (nil: a client with a 30 s timeout).
func NewManager(cfg *config.Config, store *Store, hc *http.Client, log hclog.Logger) *Manager {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	m := &Manager{store: store, hc: hc, log: log, keys: map[Key]*keyState{}}
	m.cfg.Store(cfg)
	return m
}

// SetConfig makes cfg, a reloaded config, the one sign-ins resolve servers in.
func (m *Manager) SetConfig(cfg *config.Config) { m.cfg.Store(cfg) }

// OnSignIn registers fn, called after a tenant signed in to a server (so
// its connection can be retried at once).
func (m *Manager) OnSignIn(fn func(server, tenant string)) {
	m.mu.Lock()
	m.onNew = append(m.onNew, fn)
	m.mu.Unlock()
}

func (m *Manager) state(k Key) *keyState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.keys[k]
	if st == nil {
		st = &keyState{}
		m.keys[k] = st
	}
	return st
}

// Resolve finds the server to sign in to and the key its token is kept
// under: a shared server's is the default tenant's, since one session
// serves every tenant.
func (m *Manager) Resolve(server, tenant string) (*config.MCPServer, Key, error) {
	cfg := m.cfg.Load()
	s := cfg.MCPServer(server)
	if s == nil {
		return nil, Key{}, fmt.Errorf("no mcp_server %q in the config", server)
	}
	if s.OAuth == nil {
		return nil, Key{}, fmt.Errorf("mcp_server %q has no oauth block; nothing to sign in to", server)
	}
	if tenant == "" {
		tenant = endpoint.DefaultTenant
	}
	if s.Scope != config.ScopeTenant {
		if tenant != endpoint.DefaultTenant {
			return nil, Key{}, fmt.Errorf("mcp_server %q is shared by all tenants, so its sign-in is the default tenant's; omit --tenant, or set scope = %q for one sign-in per tenant", server, config.ScopeTenant)
		}
		return s, Key{Tenant: tenant, Server: server}, nil
	}
	ts, err := cfg.ServerForTenant(server, tenant)
	if err != nil {
		return nil, Key{}, err
	}
	return ts, Key{Tenant: tenant, Server: server}, nil
}

// Client returns the HTTP client for tenant's session with s: it signs
// requests with the tenant's token and turns refusals into
// *SignInRequiredError.
func (m *Manager) Client(s *config.MCPServer, tenant string) *http.Client {
	if s.Scope != config.ScopeTenant {
		tenant = endpoint.DefaultTenant
	}
	return &http.Client{Transport: &roundTripper{m: m, s: s, key: Key{Tenant: tenant, Server: s.Name}, base: http.DefaultTransport}}
}

type roundTripper struct {
	m    *Manager
	s    *config.MCPServer
	key  Key
	base http.RoundTripper
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	m, key := rt.m, rt.key
	tok, err := m.token(req.Context(), rt.s, key, false)
	if err != nil && !errors.Is(err, ErrNoToken) {
		return nil, err
	}
	resp, err := rt.send(req, tok)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return resp, nil
	}
	ch := parseChallenge(resp)
	if resp.StatusCode == http.StatusForbidden && ch.err != "insufficient_scope" {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	st := m.state(key)
	st.mu.Lock()
	st.challenge = ch
	st.mu.Unlock()
	if resp.StatusCode == http.StatusForbidden {
		return nil, &SignInRequiredError{Server: key.Server, Tenant: key.Tenant, Reason: "the server wants more scope: " + ch.scope, Scope: ch.scope}
	}
	// A refused token may have been revoked early: one fresh token (by
	// refresh, or client credentials), one retry.
	if req.GetBody != nil && (tok != nil || rt.s.OAuth.Grant == config.GrantClientCredentials) {
		if fresh, err := m.token(req.Context(), rt.s, key, true); err == nil {
			body, err := req.GetBody()
			if err == nil {
				r2 := req.Clone(req.Context())
				r2.Body = body
				resp, err := rt.send(r2, fresh)
				if err != nil || resp.StatusCode != http.StatusUnauthorized {
					return resp, err
				}
				resp.Body.Close()
			}
		}
	}
	reason := "not signed in"
	if tok != nil {
		reason = "the server refused the token"
	}
	return nil, &SignInRequiredError{Server: key.Server, Tenant: key.Tenant, Reason: reason}
}

func (rt *roundTripper) send(req *http.Request, tok *transport.Token) (*http.Response, error) {
	if tok == nil {
		return rt.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return rt.base.RoundTrip(r)
}

// token returns key's usable access token: the stored one, refreshed when
// it expires (or when force is set, after the server refused it), or for a
// client_credentials server a new one. ErrNoToken means nobody signed in;
// a failed refresh is a *SignInRequiredError.
func (m *Manager) token(ctx context.Context, s *config.MCPServer, key Key, force bool) (*transport.Token, error) {
	rec, err := m.store.Get(key)
	if err != nil && !errors.Is(err, ErrNoToken) {
		return nil, err
	}
	if err == nil && !force && usable(&rec.Token) {
		return &rec.Token, nil
	}
	st := m.state(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	unlock, err := m.store.lockKey(key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another request, or another replica on the same data_dir, may have
	// refreshed it while this one waited.
	if again, err := m.store.Get(key); err == nil && usable(&again.Token) && (!force || rec == nil || again.Token.AccessToken != rec.Token.AccessToken) {
		return &again.Token, nil
	}
	if s.OAuth.Grant == config.GrantClientCredentials {
		rec, err := m.clientCredentials(ctx, s, key, st.challenge)
		if err != nil {
			return nil, &SignInRequiredError{Server: key.Server, Tenant: key.Tenant, Reason: "client credentials grant failed: " + err.Error()}
		}
		return &rec.Token, nil
	}
	if rec == nil {
		return nil, ErrNoToken
	}
	if rec.Token.RefreshToken == "" || rec.TokenURL == "" {
		return nil, &SignInRequiredError{Server: key.Server, Tenant: key.Tenant, Reason: "the token expired and cannot be refreshed"}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.Token.RefreshToken}}
	if rec.Resource != "" {
		form.Set("resource", rec.Resource)
	}
	// The refresh outlives a caller that gives up: a rotated refresh token
	// is spent once sent, and its successor must be saved.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	c := client{id: rec.ClientID, secret: rec.ClientSecret, method: rec.AuthMethod, audience: rec.Issuer}
	if c.method == "private_key_jwt" {
		// The key stays in the config, never in the token store.
		if c.key, err = config.ParseAssertionKey(s.OAuth.AssertionKey); err != nil {
			return nil, &SignInRequiredError{Server: key.Server, Tenant: key.Tenant, Reason: "the token expired and cannot be refreshed: " + err.Error()}
		}
	}
	tok, err := tokenRequest(rctx, m.hc, rec.TokenURL, c, form)
	if err != nil {
		m.log.Warn("token refresh failed", "server", key.Server, "tenant", key.Tenant, "error", err)
		return nil, &SignInRequiredError{Server: key.Server, Tenant: key.Tenant, Reason: "the token expired and refreshing it failed: " + err.Error()}
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = rec.Token.RefreshToken
	}
	rec.Token = *tok
	if err := m.store.Put(rec); err != nil {
		return nil, err
	}
	m.log.Info("token refreshed", "server", key.Server, "tenant", key.Tenant)
	return &rec.Token, nil
}

func usable(t *transport.Token) bool {
	skew := expirySkew
	if life := time.Duration(t.ExpiresIn) * time.Second; life > 0 && life/2 < skew {
		// A short-lived token would otherwise be refreshed on every request.
		skew = life / 2
	}
	return t.AccessToken != "" && (t.ExpiresAt.IsZero() || time.Now().Add(skew).Before(t.ExpiresAt))
}

// clientCredentials gets a token without a user (machine to machine).
func (m *Manager) clientCredentials(ctx context.Context, s *config.MCPServer, key Key, ch challenge) (*Record, error) {
	md, err := discover(ctx, m.hc, s.URL, ch)
	if err != nil {
		return nil, err
	}
	o := s.OAuth
	c, err := configuredClient(o, &md.as)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {md.resource}}
	if sc := chooseScopes(o, ch, md); len(sc) > 0 {
		form.Set("scope", strings.Join(sc, " "))
	}
	tok, err := tokenRequest(ctx, m.hc, md.as.TokenEndpoint, c, form)
	if err != nil {
		return nil, err
	}
	rec := &Record{Key: key, Token: *tok, ClientID: c.id, ClientSecret: c.secret, AuthMethod: c.method, Issuer: md.as.Issuer, TokenURL: md.as.TokenEndpoint, Resource: md.resource}
	if err := m.store.Put(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// Login signs key's tenant in to s. For the authorization code grant it
// calls show with the URL the user opens, then waits (up to LoginTimeout or
// ctx) for the authorization server to redirect the browser to cexecd's
// loopback listener. A client_credentials server gets its token at once.
func (m *Manager) Login(ctx context.Context, s *config.MCPServer, key Key, show func(authURL string)) error {
	st := m.state(key)
	st.mu.Lock()
	ch := st.challenge
	st.mu.Unlock()
	if ch.status == 0 {
		ch = probe(ctx, m.hc, s.URL)
	}
	if s.OAuth.Grant == config.GrantClientCredentials {
		if _, err := m.clientCredentials(ctx, s, key, ch); err != nil {
			return fmt.Errorf("sign in to %s: %w", s.Name, err)
		}
		m.signedIn(key)
		return nil
	}
	md, err := discover(ctx, m.hc, s.URL, ch)
	if err != nil {
		return fmt.Errorf("sign in to %s: discover its authorization server: %w", s.Name, err)
	}
	if len(md.as.CodeChallengeMethods) > 0 && !slices.Contains(md.as.CodeChallengeMethods, "S256") {
		return fmt.Errorf("sign in to %s: authorization server %s does not support PKCE with S256, which MCP requires", s.Name, md.as.Issuer)
	}
	scopes := chooseScopes(s.OAuth, ch, md)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.OAuth.RedirectPort)))
	if err != nil {
		return fmt.Errorf("sign in to %s: redirect listener: %w", s.Name, err)
	}
	defer ln.Close()
	redirectURI := "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + "/callback"
	c, err := chooseClient(ctx, m.hc, s.OAuth, &md.as, redirectURI, scopes)
	if err != nil {
		return fmt.Errorf("sign in to %s: %w", s.Name, err)
	}
	verifier, err := transport.GenerateCodeVerifier()
	if err != nil {
		return err
	}
	state, err := transport.GenerateState()
	if err != nil {
		return err
	}
	authURL, err := authorizeURL(&md.as, c, redirectURI, state, transport.GenerateCodeChallenge(verifier), md.resource, scopes)
	if err != nil {
		return fmt.Errorf("sign in to %s: %w", s.Name, err)
	}
	show(authURL)
	wctx, cancel := context.WithTimeout(ctx, LoginTimeout)
	defer cancel()
	code, err := awaitRedirect(wctx, ln, state)
	if err != nil {
		return fmt.Errorf("sign in to %s: %w", s.Name, err)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}, "resource": {md.resource}}
	tok, err := tokenRequest(ctx, m.hc, md.as.TokenEndpoint, c, form)
	if err != nil {
		return fmt.Errorf("sign in to %s: %w", s.Name, err)
	}
	rec := &Record{Key: key, Token: *tok, ClientID: c.id, ClientSecret: c.secret, AuthMethod: c.method, Issuer: md.as.Issuer, TokenURL: md.as.TokenEndpoint, Resource: md.resource}
	if err := m.store.Put(rec); err != nil {
		return err
	}
	m.signedIn(key)
	return nil
}

func (m *Manager) signedIn(key Key) {
	st := m.state(key)
	st.mu.Lock()
	st.challenge = challenge{}
	st.mu.Unlock()
	m.log.Info("signed in", "server", key.Server, "tenant", key.Tenant)
	m.mu.Lock()
	fns := slices.Clone(m.onNew)
	m.mu.Unlock()
	for _, fn := range fns {
		fn(key.Server, key.Tenant)
	}
}

// Logout forgets key's token.
func (m *Manager) Logout(key Key) error { return m.store.Delete(key) }

// List returns every kept sign-in.
func (m *Manager) List() ([]*Record, error) { return m.store.List() }

// probe sends an unauthenticated initialize to read the server's challenge.
func probe(ctx context.Context, hc *http.Client, serverURL string) challenge {
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cexec","version":"probe"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, bytes.NewBufferString(body))
	if err != nil {
		return challenge{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return challenge{}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return parseChallenge(resp)
	}
	return challenge{}
}

// awaitRedirect serves ln until the authorization server's redirect with
// state arrives, returning its code.
func awaitRedirect(ctx context.Context, ln net.Listener, state string) (string, error) {
	type result struct {
		code string
		err  error
	}
	done := make(chan result, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("state") != state {
			http.Error(w, "This sign-in link is stale or was not started by cexec.", http.StatusBadRequest)
			return
		}
		res := result{code: q.Get("code")}
		if e := q.Get("error"); e != "" {
			res = result{err: fmt.Errorf("the authorization server refused: %s %s", e, q.Get("error_description"))}
		} else if res.code == "" {
			res = result{err: errors.New("the redirect carried no code")}
		}
		if res.err != nil {
			http.Error(w, "Sign-in failed: "+res.err.Error(), http.StatusBadRequest)
		} else {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "Signed in to cexec. You can close this window.\n")
		}
		select {
		case done <- res:
		default:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("no redirect from the authorization server: %w", ctx.Err())
	}
}
