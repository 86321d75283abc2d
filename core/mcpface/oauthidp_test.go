package mcpface

// A protocol-level identity provider for the resource server's tests. No
// real one (Keycloak, a cloud provider) runs here, so this one speaks the
// protocols a real one does, as the face and the TypeScript SDK client
// see them: authorization server metadata (RFC 8414, and the same document
// as OpenID discovery), a JWK Set (RFC 7517) of RSA and P-256 keys, and a
// token endpoint for the client_credentials grant (RFC 6749 §4.4) with
// client_secret_basic, resource indicators (RFC 8707) and JWT access tokens
// (RFC 9068: typ at+jwt, iss, aud, sub, client_id, scope, iat, exp, jti).

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

// idpKey is one signing key of the provider.
type idpKey struct {
	kid  string
	alg  string
	priv crypto.Signer
}

// idpClient is a registered confidential client and the tenant its tokens
// name.
type idpClient struct {
	secret string
	tenant string
	scope  string
}

type testIdP struct {
	t      testing.TB
	srv    *httptest.Server
	issuer string
	// tenantClaim is the claim the provider puts the tenant in.
	tenantClaim string

	mu      sync.Mutex
	keys    []idpKey // published in the JWK Set; keys[0] signs issued tokens
	clients map[string]idpClient
	// jwksFetches counts requests for the key set.
	jwksFetches atomic.Int32
	// resources are the resource parameters of token requests.
	resources []string
}

func newTestIdP(t testing.TB) *testIdP {
	t.Helper()
	p := &testIdP{t: t, tenantClaim: "cexec_tenant", clients: map[string]idpClient{}}
	p.keys = []idpKey{newRSAKey(t, "rsa-1"), newECKey(t, "ec-1")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", p.metadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", p.metadata)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.issuer = p.srv.URL
	return p
}

func newRSAKey(t testing.TB, kid string) idpKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, alg: "RS256", priv: k}
}

func newECKey(t testing.TB, kid string) idpKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, alg: "ES256", priv: k}
}

// addKey publishes another key (a rotation); it signs nothing by itself.
func (p *testIdP) addKey(k idpKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, k)
}

func (p *testIdP) addClient(id, secret, tenant, scope string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients[id] = idpClient{secret: secret, tenant: tenant, scope: scope}
}

func (p *testIdP) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.issuer,
		"jwks_uri":                              p.issuer + "/jwks",
		"token_endpoint":                        p.issuer + "/token",
		"authorization_endpoint":                p.issuer + "/authorize",
		"grant_types_supported":                 []string{"client_credentials", "authorization_code"},
		"response_types_supported":              []string{"code"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		"code_challenge_methods_supported":      []string{"S256"},
		"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		"subject_types_supported":               []string{"public"},
	})
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (p *testIdP) jwks(w http.ResponseWriter, _ *http.Request) {
	p.jwksFetches.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []map[string]string
	for _, k := range p.keys {
		jwk := map[string]string{"kid": k.kid, "alg": k.alg, "use": "sig"}
		switch pk := k.priv.(type) {
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
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

// token is the client_credentials grant.
func (p *testIdP) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	p.mu.Lock()
	c, known := p.clients[id]
	p.mu.Unlock()
	if !ok || !known || c.secret != secret {
		w.Header().Set("WWW-Authenticate", `Basic realm="idp"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	resource := r.PostForm.Get("resource")
	if resource == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target", "error_description": "resource is required"})
		return
	}
	scope := c.scope
	if s := r.PostForm.Get("scope"); s != "" {
		for _, want := range strings.Fields(s) {
			if !strings.Contains(" "+c.scope+" ", " "+want+" ") {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_scope"})
				return
			}
		}
		scope = s
	}
	p.mu.Lock()
	p.resources = append(p.resources, resource)
	p.mu.Unlock()
	now := time.Now()
	tok := p.sign(jwt.MapClaims{
		"iss": p.issuer, "aud": resource, "sub": id, "client_id": id, "scope": scope,
		p.tenantClaim: c.tenant, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": b64(randomBytes(p.t)),
	})
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 300, "scope": scope})
}

func randomBytes(t testing.TB) []byte {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// sign issues a token with the provider's first key.
func (p *testIdP) sign(claims jwt.MapClaims) string {
	p.mu.Lock()
	k := p.keys[0]
	p.mu.Unlock()
	return signWith(p.t, k, claims)
}

// signWith signs claims with k as RFC 9068 access tokens are signed.
func signWith(t testing.TB, k idpKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.alg), claims)
	tok.Header["kid"] = k.kid
	tok.Header["typ"] = "at+jwt"
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claimsFor are the claims of a good token of tenant for audience.
func (p *testIdP) claimsFor(audience, tenant, scope string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": p.issuer, "aud": []string{audience}, "sub": "agent-1", "client_id": "agent-1", "scope": scope,
		p.tenantClaim: tenant, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
