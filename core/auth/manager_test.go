package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
)

// fakeOAuth is a protocol-level OAuth 2.1 authorization server and an MCP
// resource in one httptest server, written for these tests from RFC 6749,
// 7636, 7591, 8414, 8707 and 9728 (the conformance suite's servers, run by
// test/conformance/client, are the independent peers). It checks what it
// is sent and records it.
type fakeOAuth struct {
	t   *testing.T
	srv *httptest.Server

	mu          sync.Mutex
	challenges  map[string]string // code → code_challenge
	access      map[string]bool   // valid access tokens
	refresh     map[string]bool   // valid refresh tokens
	grants      []url.Values
	authorized  []url.Values
	n           int
	failRefresh bool
}

func newFakeOAuth(t *testing.T) *fakeOAuth {
	f := &fakeOAuth{t: t, challenges: map[string]string{}, access: map[string]bool{}, refresh: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": f.srv.URL + "/mcp", "authorization_servers": []string{f.srv.URL}, "scopes_supported": []string{"tools"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": f.srv.URL, "authorization_endpoint": f.srv.URL + "/authorize", "token_endpoint": f.srv.URL + "/token",
			"registration_endpoint": f.srv.URL + "/register", "code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"}})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"client_id": "dyn-client", "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f.mu.Lock()
		f.authorized = append(f.authorized, q)
		f.n++
		code := fmt.Sprintf("code-%d", f.n)
		f.challenges[code] = q.Get("code_challenge")
		f.mu.Unlock()
		if q.Get("code_challenge_method") != "S256" || q.Get("resource") != f.srv.URL+"/mcp" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.grants = append(f.grants, r.PostForm)
		if r.PostForm.Get("resource") != f.srv.URL+"/mcp" {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_target"})
			return
		}
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if f.challenges[r.PostForm.Get("code")] != base64.RawURLEncoding.EncodeToString(sum[:]) {
				w.WriteHeader(http.StatusBadRequest)
				writeJSON(w, map[string]string{"error": "invalid_grant", "error_description": "PKCE verifier mismatch"})
				return
			}
			delete(f.challenges, r.PostForm.Get("code"))
		case "refresh_token":
			if f.failRefresh || !f.refresh[r.PostForm.Get("refresh_token")] {
				w.WriteHeader(http.StatusBadRequest)
				writeJSON(w, map[string]string{"error": "invalid_grant"})
				return
			}
			delete(f.refresh, r.PostForm.Get("refresh_token")) // rotation: one use
		default:
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		f.n++
		at, rt := fmt.Sprintf("at-%d", f.n), fmt.Sprintf("rt-%d", f.n)
		f.access[at], f.refresh[rt] = true, true
		writeJSON(w, map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 3600})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		ok := f.access[tok]
		f.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+f.srv.URL+`/.well-known/oauth-protected-resource/mcp", scope="tools"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		writeJSON(w, map[string]string{"token": tok})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeOAuth) revoke(at string) {
	f.mu.Lock()
	delete(f.access, at)
	f.mu.Unlock()
}

func newTestManager(t *testing.T, f *fakeOAuth, dir string) (*Manager, *config.MCPServer) {
	t.Helper()
	store, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &config.MCPServer{Name: "remote", URL: f.srv.URL + "/mcp", Transport: config.TransportHTTP, Scope: config.ScopeShared, OAuth: &config.OAuth{Grant: config.GrantAuthorizationCode}}
	cfg := &config.Config{MCPServers: []*config.MCPServer{s}}
	return NewManager(cfg, store, nil, nil), s
}

// call sends one request through the manager's client, returning the token
// the resource saw.
func call(t *testing.T, m *Manager, s *config.MCPServer) (string, error) {
	t.Helper()
	resp, err := m.Client(s, "").Post(s.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var got struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return "", err
	}
	return got.Token, nil
}

// login signs in, following the authorization URL as a browser would.
func login(t *testing.T, m *Manager, s *config.MCPServer) {
	t.Helper()
	_, key, err := m.Resolve(s.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = m.Login(ctx, s, key, func(u string) {
		go func() {
			resp, err := http.Get(u)
			if err == nil {
				resp.Body.Close()
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSignInRefreshAndRestartAgainstProtocolLevelServer(t *testing.T) {
	f := newFakeOAuth(t)
	dir := t.TempDir()
	m, s := newTestManager(t, f, dir)

	// Not signed in: the request goes out bare, the 401 becomes a sign-in error.
	_, err := call(t, m, s)
	var sir *SignInRequiredError
	if !errors.As(err, &sir) || sir.Server != "remote" || sir.Tenant != endpoint.DefaultTenant || !strings.Contains(err.Error(), "cexecctl auth login remote") {
		t.Fatalf("before sign-in: got %v, want a SignInRequiredError naming the command", err)
	}

	login(t, m, s)
	f.mu.Lock()
	authz := f.authorized[0]
	f.mu.Unlock()
	if authz.Get("client_id") != "dyn-client" || authz.Get("scope") != "tools" {
		t.Errorf("authorization request: client_id %q scope %q, want the registered client and the challenge's scope", authz.Get("client_id"), authz.Get("scope"))
	}
	tok, err := call(t, m, s)
	if err != nil || tok == "" {
		t.Fatalf("signed in: %q %v", tok, err)
	}

	// A restarted daemon (a new manager over the same folder) has it.
	m2, s2 := newTestManager(t, f, dir)
	if again, err := call(t, m2, s2); err != nil || again != tok {
		t.Fatalf("after restart: %q %v, want %q", again, err, tok)
	}

	// Expired: refreshed (with the resource indicator, the spent refresh
	// token replaced), and the new token used.
	key := Key{Tenant: endpoint.DefaultTenant, Server: "remote"}
	rec, err := m2.store.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	oldRefresh := rec.Token.RefreshToken
	rec.Token.ExpiresAt = time.Now().Add(-time.Minute)
	if err := m2.store.Put(rec); err != nil {
		t.Fatal(err)
	}
	fresh, err := call(t, m2, s2)
	if err != nil || fresh == tok {
		t.Fatalf("after expiry: %q %v, want a new token", fresh, err)
	}
	f.mu.Lock()
	last := f.grants[len(f.grants)-1]
	f.mu.Unlock()
	if last.Get("grant_type") != "refresh_token" || last.Get("refresh_token") != oldRefresh || last.Get("client_id") != "dyn-client" {
		t.Errorf("refresh request: %v", last)
	}
	if rec, _ := m2.store.Get(key); rec.Token.RefreshToken == oldRefresh {
		t.Error("the rotated refresh token was not kept")
	}

	// Revoked early: one refresh and a retry of the same request.
	f.revoke(fresh)
	if again, err := call(t, m2, s2); err != nil || again == fresh {
		t.Fatalf("after revocation: %q %v", again, err)
	}

	// Refresh refused: a sign-in error, not a loop.
	f.mu.Lock()
	f.failRefresh = true
	f.mu.Unlock()
	rec, _ = m2.store.Get(key)
	rec.Token.ExpiresAt = time.Now().Add(-time.Minute)
	_ = m2.store.Put(rec)
	if _, err := call(t, m2, s2); !errors.As(err, &sir) || !strings.Contains(sir.Reason, "refreshing it failed") {
		t.Fatalf("refused refresh: got %v", err)
	}
}

func TestResolveKeysTenants(t *testing.T) {
	shared := &config.MCPServer{Name: "shared", Scope: config.ScopeShared, OAuth: &config.OAuth{}}
	plain := &config.MCPServer{Name: "plain", Scope: config.ScopeShared}
	m := NewManager(&config.Config{MCPServers: []*config.MCPServer{shared, plain}}, nil, nil, nil)
	if _, k, err := m.Resolve("shared", ""); err != nil || k.Tenant != endpoint.DefaultTenant {
		t.Errorf("shared, no tenant: %v %v", k, err)
	}
	if _, _, err := m.Resolve("shared", "acme"); err == nil {
		t.Error("a shared server accepted a per-tenant sign-in")
	}
	if _, _, err := m.Resolve("plain", ""); err == nil || !strings.Contains(err.Error(), "no oauth block") {
		t.Errorf("server without oauth: %v", err)
	}
	if _, _, err := m.Resolve("nope", ""); err == nil {
		t.Error("unknown server accepted")
	}
}

// TestRefreshOnceAcrossReplicas: two daemons on one data_dir (replicas)
// find the token expired at once. The server rotates refresh tokens, so a
// second refresh with the spent one would fail: one refreshes, the other
// reads what it saved, and every request of both gets through.
func TestRefreshOnceAcrossReplicas(t *testing.T) {
	f := newFakeOAuth(t)
	dir := t.TempDir()
	a, sa := newTestManager(t, f, dir)
	b, sb := newTestManager(t, f, dir)
	login(t, a, sa)
	key := Key{Tenant: endpoint.DefaultTenant, Server: "remote"}
	rec, err := a.store.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	rec.Token.ExpiresAt = time.Now().Add(-time.Minute)
	if err := a.store.Put(rec); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	before := len(f.grants)
	f.mu.Unlock()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, s := a, sa
			if i%2 == 1 {
				m, s = b, sb
			}
			if tok, err := call(t, m, s); err != nil || tok == "" {
				t.Errorf("request %d after expiry: %q %v", i, tok, err)
			}
		}()
	}
	wg.Wait()
	f.mu.Lock()
	refreshes := len(f.grants) - before
	f.mu.Unlock()
	if refreshes != 1 {
		t.Fatalf("%d refreshes for one expired token over two replicas, want 1", refreshes)
	}
}
