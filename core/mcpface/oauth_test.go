package mcpface

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/internal/testutil/idptest"
)

// oauthWorld is a face that is an OAuth resource server of idp, served on
// a listener opened first so that its audience is its real URL.
func oauthWorld(t *testing.T, idp *idptest.IdP, scopes ...string) (*world, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	audience := "http://" + ln.Addr().String() + "/mcp"
	w := newWorld(t, func(o *Options, w *world) {
		o.Tokens = []Token{{Token: "static-ops", Tenant: "ops"}}
		o.OAuth = &OAuth{Issuer: idp.Issuer, Audience: audience, TenantClaim: idp.TenantClaim, RequiredScopes: scopes}
		w.ln = ln
	})
	return w, audience
}

// TestOAuthResourceServerWithProtocolLevelIdP: the face as a resource
// server of a protocol-level identity provider (internal/testutil/idptest) accepts
// its valid RS256 and ES256 access tokens, taking the tenant from the
// configured claim, and refuses wrong audience, expired, not yet valid,
// unsigned, HMAC-confused, foreign-issuer, foreign-key, tenantless and
// under-scoped tokens with RFC 6750 challenges that point at the protected
// resource metadata. Static tokens keep working beside it.
func TestOAuthResourceServerWithProtocolLevelIdP(t *testing.T) {
	idp := idptest.New(t)
	w, aud := oauthWorld(t, idp, "mcp")
	rsaKey, ecKey := idp.Keys()[0], idp.Keys()[1]
	good := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := idp.Claims(aud, "acme", "mcp openid")
		if mod != nil {
			mod(c)
		}
		return c
	}
	now := time.Now()
	pubDER, err := x509.MarshalPKIXPublicKey(rsaKey.Priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hmacConfused := jwt.NewWithClaims(jwt.SigningMethodHS256, good(nil))
	hmacConfused.Header["kid"] = rsaKey.KID
	confused, err := hmacConfused.SignedString(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := jwt.NewWithClaims(jwt.SigningMethodNone, good(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	stranger := idptest.NewRSAKey(t, rsaKey.KID) // same kid, a key the issuer never published

	tests := []struct {
		name   string
		token  string
		asked  string // X-Cexec-Tenant
		status int
		tenant string
		want   string // in the body and, for 401/403, the challenge
	}{
		{"valid RS256", idptest.SignWith(t, rsaKey, good(nil)), "", http.StatusOK, "acme", ""},
		{"valid ES256, audience as a string, scp list", idptest.SignWith(t, ecKey, good(func(c jwt.MapClaims) {
			c["aud"], c[idp.TenantClaim] = aud, "beta"
			delete(c, "scope")
			c["scp"] = []string{"mcp"}
		})), "", http.StatusOK, "beta", ""},
		{"expired within the leeway", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["exp"] = now.Add(-5 * time.Second).Unix() })), "", http.StatusOK, "acme", ""},
		{"static token beside oauth", "static-ops", "", http.StatusOK, "ops", ""},
		{"wrong audience", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["aud"] = "http://other.example/mcp" })), "", http.StatusUnauthorized, "", "audience must be " + aud},
		{"audience of the issuer", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["aud"] = idp.Issuer })), "", http.StatusUnauthorized, "", "audience"},
		{"no audience", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { delete(c, "aud") })), "", http.StatusUnauthorized, "", "required claim"},
		{"expired", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["exp"] = now.Add(-2 * time.Minute).Unix() })), "", http.StatusUnauthorized, "", "expired"},
		{"no expiry", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { delete(c, "exp") })), "", http.StatusUnauthorized, "", "required claim"},
		{"not valid yet", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["nbf"] = now.Add(5 * time.Minute).Unix() })), "", http.StatusUnauthorized, "", "not valid yet"},
		{"issued in the future", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["iat"] = now.Add(5 * time.Minute).Unix() })), "", http.StatusUnauthorized, "", "not valid yet"},
		{"unsigned (alg none)", unsigned, "", http.StatusUnauthorized, "", "signature"},
		{"HS256 with the RSA public key as secret", confused, "", http.StatusUnauthorized, "", "signature"},
		{"signed by a key the issuer never published", idptest.SignWith(t, stranger, good(nil)), "", http.StatusUnauthorized, "", "signature"},
		{"signature cut off", func() string { s := idptest.SignWith(t, rsaKey, good(nil)); return s[:strings.LastIndexByte(s, '.')+1] }(), "", http.StatusUnauthorized, "", "signature"},
		{"claims altered after signing", func() string {
			s := strings.Split(idptest.SignWith(t, rsaKey, good(nil)), ".")
			other := strings.Split(idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c[idp.TenantClaim] = "beta" })), ".")
			return s[0] + "." + other[1] + "." + s[2]
		}(), "", http.StatusUnauthorized, "", "signature"},
		{"other issuer", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["iss"] = "http://evil.example" })), "", http.StatusUnauthorized, "", "issuer"},
		{"not a JWT", "not-a-jwt", "", http.StatusUnauthorized, "", "not a JWT"},
		{"no tenant claim", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { delete(c, idp.TenantClaim) })), "", http.StatusUnauthorized, "", `no "cexec_tenant" claim`},
		{"tenant claim not a tenant id", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c[idp.TenantClaim] = "../acme" })), "", http.StatusUnauthorized, "", "not a tenant id"},
		{"scope missing", idptest.SignWith(t, rsaKey, good(func(c jwt.MapClaims) { c["scope"] = "openid" })), "", http.StatusForbidden, "", "insufficient_scope"},
		{"another tenant asked for", idptest.SignWith(t, rsaKey, good(nil)), "beta", http.StatusForbidden, "", `belongs to tenant "acme"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRaw(t, nil, w.url+"/mcp")
			c.header.Set("Authorization", "Bearer "+tt.token)
			if tt.asked != "" {
				c.header.Set("X-Cexec-Tenant", tt.asked)
			}
			if tt.status == http.StatusOK {
				if st := c.initialize(); st != http.StatusOK {
					t.Fatalf("initialize: %d", st)
				}
				if owner, _ := w.face.sessions.owner(c.session); owner != tt.tenant {
					t.Errorf("session of tenant %q, want %q", owner, tt.tenant)
				}
				return
			}
			res, body := c.do(http.MethodPost, initBody)
			challenge := res.Header.Get("WWW-Authenticate")
			if res.StatusCode != tt.status || !strings.Contains(body+challenge, tt.want) {
				t.Fatalf("got %s %q (WWW-Authenticate %q), want %d with %q", res.Status, body, challenge, tt.status, tt.want)
			}
			if strings.Contains(body+challenge, tt.token) {
				t.Errorf("the refusal echoes the token")
			}
			if tt.status == http.StatusUnauthorized && (!strings.Contains(challenge, `error="invalid_token"`) ||
				!strings.Contains(challenge, `resource_metadata="http://`+strings.TrimPrefix(strings.TrimSuffix(aud, "/mcp"), "http://")+`/.well-known/oauth-protected-resource/mcp"`)) {
				t.Errorf("WWW-Authenticate %q lacks invalid_token or the resource metadata", challenge)
			}
			if tt.want == "insufficient_scope" && !strings.Contains(challenge, `scope="mcp"`) {
				t.Errorf("WWW-Authenticate %q does not name the scope", challenge)
			}
		})
	}
}

// TestOAuthProtectedResourceMetadata: without a token the face answers 401
// pointing at its RFC 9728 metadata, served without a token at the path the
// configured audience gives and at the root, naming the configured
// audience whatever Host the request names.
func TestOAuthProtectedResourceMetadata(t *testing.T) {
	idp := idptest.New(t)
	w, aud := oauthWorld(t, idp, "mcp", "cexec:run")
	res, body := newRaw(t, nil, w.url+"/mcp").do(http.MethodPost, initBody)
	wantMD := w.url + "/.well-known/oauth-protected-resource/mcp"
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != `Bearer realm="cexec", resource_metadata="`+wantMD+`"` {
		t.Fatalf("no token: %s %q, WWW-Authenticate %q", res.Status, body, res.Header.Get("WWW-Authenticate"))
	}
	for _, u := range []string{wantMD, w.url + "/.well-known/oauth-protected-resource"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Host = "attacker.example:80"
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var md struct {
			Resource        string   `json:"resource"`
			Servers         []string `json:"authorization_servers"`
			Scopes          []string `json:"scopes_supported"`
			BearerMethods   []string `json:"bearer_methods_supported"`
			UnknownIsIgnore string   `json:"resource_name"`
		}
		err = json.NewDecoder(res.Body).Decode(&md)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %s %v", u, res.Status, err)
		}
		if md.Resource != aud || len(md.Servers) != 1 || md.Servers[0] != idp.Issuer ||
			strings.Join(md.Scopes, " ") != "mcp cexec:run" || strings.Join(md.BearerMethods, ",") != "header" {
			t.Errorf("GET %s: %+v", u, md)
		}
	}
	res, _ = newRaw(t, nil, w.url+"/.well-known/oauth-protected-resource").do(http.MethodPost, "{}")
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to the metadata: %s", res.Status)
	}
}

// TestOAuthKeyRotationRateLimited: a token signed with a key the issuer
// published after the face cached its set makes the face fetch the set once
// more and is accepted; tokens naming made-up key ids do not make it fetch
// again (the refresh is rate-limited), and are refused.
func TestOAuthKeyRotationRateLimited(t *testing.T) {
	idp := idptest.New(t)
	w, aud := oauthWorld(t, idp)
	try := func(k idptest.Key) int {
		c := newRaw(t, nil, w.url+"/mcp")
		c.header.Set("Authorization", "Bearer "+idptest.SignWith(t, k, idp.Claims(aud, "acme", "")))
		return c.initialize()
	}
	if st := try(idp.Keys()[0]); st != http.StatusOK {
		t.Fatalf("first token: %d", st)
	}
	if n := idp.JWKSFetches(); n != 1 {
		t.Fatalf("key set fetched %d times for the first token, want 1", n)
	}
	if st := try(idp.Keys()[0]); st != http.StatusOK || idp.JWKSFetches() != 1 {
		t.Fatalf("second token: %d, key set fetched %d times: not cached", st, idp.JWKSFetches())
	}
	rotated := idptest.NewECKey(t, "ec-2")
	idp.AddKey(rotated)
	if st := try(rotated); st != http.StatusOK {
		t.Fatalf("token of the rotated key: %d", st)
	}
	if n := idp.JWKSFetches(); n != 2 {
		t.Fatalf("key set fetched %d times after the rotation, want 2", n)
	}
	for i := range 5 {
		if st := try(idptest.NewRSAKey(t, "made-up-"+string(rune('a'+i)))); st != http.StatusUnauthorized {
			t.Errorf("token of a made-up key: %d", st)
		}
	}
	if n := idp.JWKSFetches(); n != 2 {
		t.Errorf("made-up key ids made the face fetch the key set %d times in all, want 2", n)
	}
}

// TestOAuthIdentityProviderDown: when the issuer's metadata cannot be had,
// a token gets 503 (not a claim that it is invalid), and the static tokens
// still work.
func TestOAuthIdentityProviderDown(t *testing.T) {
	idp := idptest.New(t)
	w, aud := oauthWorld(t, idp)
	tok := idptest.SignWith(t, idp.Keys()[0], idp.Claims(aud, "acme", ""))
	idp.Close()
	c := newRaw(t, nil, w.url+"/mcp")
	c.header.Set("Authorization", "Bearer "+tok)
	if res, body := c.do(http.MethodPost, initBody); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "identity provider") {
		t.Errorf("issuer down: %s %q", res.Status, body)
	}
	c = newRaw(t, nil, w.url+"/mcp")
	c.header.Set("Authorization", "Bearer static-ops")
	if st := c.initialize(); st != http.StatusOK {
		t.Errorf("static token with the issuer down: %d", st)
	}
}

// TestOAuthDiscovery: the key set's URL comes from the issuer's RFC 8414
// metadata, or OpenID discovery for an issuer with a path; metadata naming
// another issuer is refused.
func TestOAuthDiscovery(t *testing.T) {
	mux := http.NewServeMux()
	srv := newServer(t, mux)
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		idptest.WriteJSON(w, 200, map[string]string{"issuer": srv, "jwks_uri": srv + "/keys-8414"})
	})
	mux.HandleFunc("/realms/a/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		idptest.WriteJSON(w, 200, map[string]string{"issuer": srv + "/realms/a", "jwks_uri": srv + "/keys-oidc"})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server/realms/b", func(w http.ResponseWriter, _ *http.Request) {
		idptest.WriteJSON(w, 200, map[string]string{"issuer": "https://evil.example", "jwks_uri": srv + "/keys"})
	})
	ctx := context.Background()
	for issuer, want := range map[string]string{srv: srv + "/keys-8414", srv + "/realms/a": srv + "/keys-oidc", srv + "/realms/b": "names issuer"} {
		got, err := discoverJWKS(ctx, http.DefaultClient, issuer)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("discover %s: %q, want %q", issuer, got, want)
		}
	}
}

func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String()
}

// TestOAuthApplyConfig: the mcp block's oauth block reaches the face, and
// with it a non-loopback listener is allowed without static tokens.
func TestOAuthApplyConfig(t *testing.T) {
	var o Options
	o.ApplyConfig(config.MCP{OAuth: &config.MCPOAuth{Issuer: "https://idp.example", Audience: "https://mcp.example/mcp", TenantClaim: "t", RequiredScopes: []string{"mcp"}}})
	if o.OAuth == nil || o.OAuth.Issuer != "https://idp.example" || o.OAuth.Audience != "https://mcp.example/mcp" || o.OAuth.TenantClaim != "t" || o.OAuth.RequiredScopes[0] != "mcp" {
		t.Fatalf("OAuth = %+v", o.OAuth)
	}
	o.Catalog, o.Searcher, o.Executor, o.State, o.Skills, o.PII = &testCatalog{}, wordSearcher{}, &zygoteExecutor{}, &memState{}, &memSkills{}, &emailTokenizer{}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ln, err := f.ListenTCP("0.0.0.0:0")
	if err != nil {
		t.Fatalf("ListenTCP on all interfaces with oauth: %v", err)
	}
	_ = ln.Close()
}

// TestOAuthTypeScriptClientCredentials: the official TypeScript SDK client
// signs in by itself: its ClientCredentialsProvider reads the 401's
// resource_metadata, fetches the protected resource metadata, discovers
// the protocol-level identity provider's metadata, gets a token for the
// face's audience with the client_credentials grant, and lists the tools.
func TestOAuthTypeScriptClientCredentials(t *testing.T) {
	node := peerNode(t)
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test/peers/node_modules/@modelcontextprotocol/sdk/package.json")); err != nil {
		testutil.SkipMissing(t, "the TypeScript SDK is not installed in test/peers (run scripts/deps.sh): %v", err)
	}
	idp := idptest.New(t)
	idp.AddClient("agent-7", "s3cret", "acme", "mcp")
	w, aud := oauthWorld(t, idp, "mcp")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "test/mcp-client/oauth.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL="+aud, "OAUTH_ISSUER="+idp.Issuer, "OAUTH_CLIENT_ID=agent-7", "OAUTH_CLIENT_SECRET=s3cret", "OAUTH_SCOPE=mcp")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("oauth.mjs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "tools: ") || !strings.Contains(string(out), "execute_code") {
		t.Errorf("oauth.mjs: %s", out)
	}
	resources := idp.Resources()
	if len(resources) == 0 || resources[0] != aud {
		t.Errorf("token requests named resources %q, want %q", resources, aud)
	}
	if n := w.face.Sessions(); n != 0 {
		t.Errorf("%d sessions left after the client closed", n)
	}
}
