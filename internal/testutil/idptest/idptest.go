// Package idptest is a protocol-level identity provider for tests of
// cexec as an OAuth resource server. No real one (Keycloak, a cloud
// provider) runs here, so this one speaks the protocols a real one does, as
// the MCP face and the TypeScript SDK client see them: authorization server metadata (RFC 8414, and the same document
// as OpenID discovery), a JWK Set (RFC 7517) of RSA and P-256 keys, and a
// token endpoint for the client_credentials grant (RFC 6749 §4.4) with
// client_secret_basic, resource indicators (RFC 8707) and JWT access tokens
// (RFC 9068: typ at+jwt, iss, aud, sub, client_id, scope, iat, exp, jti).
package idptest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Key is one signing key of the provider.
type Key struct {
	KID  string
	Alg  string
	Priv crypto.Signer
}

// idpClient is a registered confidential client and the tenant its tokens
// name.
type idpClient struct {
	secret string
	tenant string
	scope  string
}

// IdP is the provider: an HTTP server on 127.0.0.1.
type IdP struct {
	t   testing.TB
	srv *httptest.Server
	// Issuer is its issuer identifier, its base URL.
	Issuer string
	// TenantClaim is the claim the provider puts the tenant in.
	TenantClaim string

	mu      sync.Mutex
	keys    []Key // published in the JWK Set; keys[0] signs issued tokens
	clients map[string]idpClient
	// jwksFetches counts requests for the key set.
	jwksFetches atomic.Int32
	// resources are the resource parameters of token requests.
	resources []string
}

// New starts a provider with an RSA and a P-256 key; it stops when the
// test ends.
func New(t testing.TB) *IdP {
	t.Helper()
	p := &IdP{t: t, TenantClaim: "cexec_tenant", clients: map[string]idpClient{}}
	p.keys = []Key{NewRSAKey(t, "rsa-1"), NewECKey(t, "ec-1")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", p.metadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", p.metadata)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.Issuer = p.srv.URL
	return p
}

// NewRSAKey is an RS256 key.
func NewRSAKey(t testing.TB, kid string) Key {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return Key{KID: kid, Alg: "RS256", Priv: k}
}

// NewECKey is an ES256 key.
func NewECKey(t testing.TB, kid string) Key {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{KID: kid, Alg: "ES256", Priv: k}
}

// AddKey publishes another key (a rotation); it signs nothing by itself.
func (p *IdP) AddKey(k Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, k)
}

// AddClient registers a confidential client whose tokens name tenant.
func (p *IdP) AddClient(id, secret, tenant, scope string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients[id] = idpClient{secret: secret, tenant: tenant, scope: scope}
}

func (p *IdP) metadata(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.Issuer,
		"jwks_uri":                              p.Issuer + "/jwks",
		"token_endpoint":                        p.Issuer + "/token",
		"authorization_endpoint":                p.Issuer + "/authorize",
		"grant_types_supported":                 []string{"client_credentials", "authorization_code"},
		"response_types_supported":              []string{"code"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		"code_challenge_methods_supported":      []string{"S256"},
		"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		"subject_types_supported":               []string{"public"},
	})
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (p *IdP) jwks(w http.ResponseWriter, _ *http.Request) {
	p.jwksFetches.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []map[string]string
	for _, k := range p.keys {
		jwk := map[string]string{"kid": k.KID, "alg": k.Alg, "use": "sig"}
		switch pk := k.Priv.(type) {
		case *rsa.PrivateKey:
			jwk["kty"], jwk["n"], jwk["e"] = "RSA", b64(pk.N.Bytes()), b64(big.NewInt(int64(pk.E)).Bytes())
		case *ecdsa.PrivateKey:
			pt, err := pk.PublicKey.Bytes() // 0x04 || X || Y
			if err != nil {
				p.t.Error(err)
				return
			}
			jwk["kty"], jwk["crv"], jwk["x"], jwk["y"] = "EC", "P-256", b64(pt[1:33]), b64(pt[33:])
		}
		keys = append(keys, jwk)
	}
	WriteJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

// token is the client_credentials grant.
func (p *IdP) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	p.mu.Lock()
	c, known := p.clients[id]
	p.mu.Unlock()
	if !ok || !known || c.secret != secret {
		w.Header().Set("WWW-Authenticate", `Basic realm="idp"`)
		WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	resource := r.PostForm.Get("resource")
	if resource == "" {
		WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target", "error_description": "resource is required"})
		return
	}
	scope := c.scope
	if s := r.PostForm.Get("scope"); s != "" {
		for _, want := range strings.Fields(s) {
			if !strings.Contains(" "+c.scope+" ", " "+want+" ") {
				WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_scope"})
				return
			}
		}
		scope = s
	}
	p.mu.Lock()
	p.resources = append(p.resources, resource)
	p.mu.Unlock()
	now := time.Now()
	tok := p.Sign(jwt.MapClaims{
		"iss": p.Issuer, "aud": resource, "sub": id, "client_id": id, "scope": scope,
		p.TenantClaim: c.tenant, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": b64(randomBytes(p.t)),
	})
	WriteJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 300, "scope": scope})
}

func randomBytes(t testing.TB) []byte {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// Sign issues a token with the provider's first key.
func (p *IdP) Sign(claims jwt.MapClaims) string {
	p.mu.Lock()
	k := p.keys[0]
	p.mu.Unlock()
	return SignWith(p.t, k, claims)
}

// SignWith signs claims with k as RFC 9068 access tokens are signed.
func SignWith(t testing.TB, k Key, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), claims)
	tok.Header["kid"] = k.KID
	tok.Header["typ"] = "at+jwt"
	s, err := tok.SignedString(k.Priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Claims are the claims of a good token of tenant for audience.
func (p *IdP) Claims(audience, tenant, scope string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": p.Issuer, "aud": []string{audience}, "sub": "agent-1", "client_id": "agent-1", "scope": scope,
		p.TenantClaim: tenant, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	}
}

// Keys are the published keys, the signing one first.
func (p *IdP) Keys() []Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Key(nil), p.keys...)
}

// JWKSFetches counts the requests for the key set so far.
func (p *IdP) JWKSFetches() int { return int(p.jwksFetches.Load()) }

// Resources are the resource parameters (RFC 8707) of the token requests
// so far.
func (p *IdP) Resources() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.resources...)
}

// Close stops the provider, as if it went down.
func (p *IdP) Close() { p.srv.Close() }

// WriteJSON answers with v as JSON, as the provider does.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
