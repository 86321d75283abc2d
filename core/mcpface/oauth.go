package mcpface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"
)

// OAuth makes the face an OAuth 2.1 resource server (MCP authorization,
// RFC 9728): besides the static bearer tokens it accepts JWT access tokens
// signed by Issuer's keys, for Audience, and takes the tenant from
// TenantClaim.
type OAuth struct {
	// Issuer is the tokens' iss and where the authorization server's
	// metadata is (RFC 8414, else OpenID discovery).
	Issuer string
	// JWKSURL is the issuer's key set; "" discovers its jwks_uri.
	JWKSURL string
	// Audience is the face's public URL: tokens must name it in aud, and
	// the protected resource metadata names it as the resource. It is never
	// derived from a request (a Host header is the client's to choose).
	Audience string
	// TenantClaim names the claim whose string value is the tenant.
	TenantClaim string
	// RequiredScopes must all be in the token's scope (or scp) claim.
	RequiredScopes []string
	// HTTPClient fetches the metadata and keys; default: a client with a
	// 10-second timeout.
	HTTPClient *http.Client
}

// Key handling of the resource server.
const (
	// oauthLeeway absorbs clock skew between the issuer and cexecd in exp,
	// nbf and iat.
	oauthLeeway = 30 * time.Second
	// oauthFetchTimeout bounds one fetch of the metadata or the keys.
	oauthFetchTimeout = 10 * time.Second
	// oauthRefresh is how often the key set is fetched again, so a revoked
	// key stops verifying.
	oauthRefresh = time.Hour
	// oauthUnknownKID is how often a token signed with a key not in the
	// cached set may make the face fetch the set (key rotation); tokens
	// with made-up key ids cannot make it fetch more often than that.
	oauthUnknownKID = 30 * time.Second
	// oauthRetryDiscovery is how long a failed metadata discovery is
	// remembered before the next request tries again.
	oauthRetryDiscovery = 10 * time.Second
)

// asymmetricAlgs are the signatures accepted. HMAC is not among them: the
// issuer's published keys are public, and a token "signed" with one of
// them as an HMAC secret would verify. Nor is "none".
var asymmetricAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// protectedResourcePath is RFC 9728's well-known prefix.
const protectedResourcePath = "/.well-known/oauth-protected-resource"

// resourceServer checks JWT access tokens and publishes the protected
// resource metadata.
type resourceServer struct {
	o   OAuth
	log hclog.Logger
	// metadataURL is where the metadata is, by RFC 9728 §3.1 from the
	// audience: the well-known prefix between its host and its path.
	metadataURL string
	// metadataPaths are the paths served: the audience's and the root.
	metadataPaths []string
	metadata      []byte
	parser        *jwt.Parser

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	keys     keyfunc.Keyfunc
	stopKeys context.CancelFunc // ends the key set's refreshing
	failedAt time.Time
	failed   error
}

func newResourceServer(o OAuth, log hclog.Logger) (*resourceServer, error) {
	aud, err := url.Parse(o.Audience)
	if err != nil || !aud.IsAbs() || aud.Host == "" || aud.Fragment != "" || aud.RawQuery != "" {
		return nil, fmt.Errorf("mcp face: oauth audience %q is not an absolute URL without query or fragment", o.Audience)
	}
	if _, err := url.Parse(o.Issuer); err != nil || o.Issuer == "" {
		return nil, fmt.Errorf("mcp face: oauth issuer %q is not a URL", o.Issuer)
	}
	if o.TenantClaim == "" {
		return nil, errors.New("mcp face: oauth needs the claim that names the tenant")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: oauthFetchTimeout}
	}
	rs := &resourceServer{o: o, log: log.Named("oauth")}
	resPath := strings.TrimSuffix(aud.EscapedPath(), "/")
	rs.metadataURL = aud.Scheme + "://" + aud.Host + protectedResourcePath + resPath
	rs.metadataPaths = []string{protectedResourcePath}
	if resPath != "" {
		rs.metadataPaths = append(rs.metadataPaths, protectedResourcePath+resPath)
	}
	md := map[string]any{
		"resource":                 o.Audience,
		"authorization_servers":    []string{o.Issuer},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "cexec",
	}
	if len(o.RequiredScopes) > 0 {
		md["scopes_supported"] = o.RequiredScopes
	}
	if rs.metadata, err = json.Marshal(md); err != nil {
		return nil, err
	}
	rs.parser = jwt.NewParser(
		jwt.WithValidMethods(asymmetricAlgs),
		jwt.WithIssuer(o.Issuer),
		jwt.WithAudience(o.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(oauthLeeway),
	)
	rs.ctx, rs.cancel = context.WithCancel(context.Background())
	return rs, nil
}

// close stops the key set's refreshing.
func (rs *resourceServer) close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.stopKeys != nil {
		rs.stopKeys()
	}
	rs.cancel()
}

// serveMetadata answers the protected resource metadata requests, which
// need no token and come from anywhere (a browser client's too), and
// reports whether r was one.
func (rs *resourceServer) serveMetadata(w http.ResponseWriter, r *http.Request) bool {
	if !slices.Contains(rs.metadataPaths, r.URL.Path) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		h.Set("Access-Control-Allow-Methods", "GET")
		h.Set("Access-Control-Allow-Headers", "Mcp-Protocol-Version")
		w.WriteHeader(http.StatusNoContent)
		return true
	default:
		h.Set("Allow", "GET, HEAD, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return true
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "max-age=3600")
	_, _ = w.Write(rs.metadata)
	return true
}

// challenge is the WWW-Authenticate value of a refusal (RFC 6750 §3 with
// RFC 9728's resource_metadata): code is "" when no token was sent.
func (rs *resourceServer) challenge(code, desc string) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="cexec"`)
	if code != "" {
		fmt.Fprintf(&b, `, error=%q, error_description=%q`, code, quoteSafe(desc))
	}
	if code == "insufficient_scope" {
		fmt.Fprintf(&b, `, scope=%q`, strings.Join(rs.o.RequiredScopes, " "))
	}
	fmt.Fprintf(&b, `, resource_metadata=%q`, rs.metadataURL)
	return b.String()
}

// quoteSafe keeps a description to the characters RFC 6750 allows in it.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '\''
		}
		return r
	}, s)
}

// tokenRefusal is why an access token was refused.
type tokenRefusal struct {
	status int
	code   string // RFC 6750: invalid_token, insufficient_scope
	msg    string
}

// verify checks a JWT access token and returns its tenant.
func (rs *resourceServer) verify(ctx context.Context, raw string) (string, *tokenRefusal) {
	keys, err := rs.keySet()
	if err != nil {
		rs.log.Warn("cannot check access tokens: the issuer's keys are unavailable", "issuer", rs.o.Issuer, "error", err)
		return "", &tokenRefusal{http.StatusServiceUnavailable, "", "cannot check the access token: the identity provider's keys are unavailable; try again later"}
	}
	claims := jwt.MapClaims{}
	if _, err := rs.parser.ParseWithClaims(raw, claims, keys.KeyfuncCtx(ctx)); err != nil {
		rs.log.Debug("refused access token", "error", err)
		return "", &tokenRefusal{http.StatusUnauthorized, "invalid_token", rs.describe(err)}
	}
	tenant, ok := claims[rs.o.TenantClaim].(string)
	if !ok || tenant == "" {
		return "", &tokenRefusal{http.StatusUnauthorized, "invalid_token", fmt.Sprintf("the token has no %q claim naming the tenant", rs.o.TenantClaim)}
	}
	if !tenantRE.MatchString(tenant) {
		return "", &tokenRefusal{http.StatusUnauthorized, "invalid_token", fmt.Sprintf("the token's %q claim is not a tenant id (1-64 of a-z, 0-9, _ and -)", rs.o.TenantClaim)}
	}
	if missing := missingScopes(claims, rs.o.RequiredScopes); len(missing) > 0 {
		return "", &tokenRefusal{http.StatusForbidden, "insufficient_scope", "the token lacks the scope " + strings.Join(missing, " ")}
	}
	return tenant, nil
}

// describe says in a sentence why a token failed, without echoing it.
func (rs *resourceServer) describe(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is not a JWT"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature does not verify with the issuer's keys (signed with " + strings.Join(asymmetricAlgs, ", ") + ")"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token is not for this server: its audience must be " + rs.o.Audience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the token is not from the issuer " + rs.o.Issuer
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token lacks a required claim (exp, iss and aud are required)"
	}
	return "invalid token"
}

// missingScopes are the required scopes the token was not granted: RFC
// 9068's space-separated scope claim, or the scp list some providers use.
func missingScopes(claims jwt.MapClaims, required []string) []string {
	var granted []string
	if s, ok := claims["scope"].(string); ok {
		granted = strings.Fields(s)
	}
	switch scp := claims["scp"].(type) {
	case string:
		granted = append(granted, strings.Fields(scp)...)
	case []any:
		for _, v := range scp {
			if s, ok := v.(string); ok {
				granted = append(granted, s)
			}
		}
	}
	var missing []string
	for _, s := range required {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// keySet is the issuer's key set, set up on first use (so cexecd starts
// while the identity provider is down): discovered from the issuer's
// metadata unless configured, cached, refreshed every oauthRefresh and, at
// most every oauthUnknownKID, when a token names an unknown key.
func (rs *resourceServer) keySet() (keyfunc.Keyfunc, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.keys != nil {
		return rs.keys, nil
	}
	if rs.failed != nil && time.Since(rs.failedAt) < oauthRetryDiscovery {
		return nil, rs.failed
	}
	jwksURL := rs.o.JWKSURL
	if jwksURL == "" {
		// Not the request's context: its client going away must not
		// count as the identity provider failing.
		u, err := discoverJWKS(rs.ctx, rs.o.HTTPClient, rs.o.Issuer)
		if err != nil {
			rs.failed, rs.failedAt = err, time.Now()
			return nil, err
		}
		jwksURL = u
	}
	noErrorFirst := false
	// The refresh goroutine starts before the first fetch; a failed
	// attempt stops its own.
	kctx, kcancel := context.WithCancel(rs.ctx)
	keys, err := keyfunc.NewDefaultOverrideCtx(kctx, []string{jwksURL}, keyfunc.Override{
		Client:                    rs.o.HTTPClient,
		HTTPTimeout:               oauthFetchTimeout,
		NoErrorReturnFirstHTTPReq: &noErrorFirst,
		RefreshInterval:           oauthRefresh,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(oauthUnknownKID), 1),
		// A token with an unknown key waits this long at most for the
		// limiter, and fails at once when the next fetch is further off.
		RateLimitWaitMax: 5 * time.Second,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				rs.log.Warn("refreshing the issuer's keys failed", "jwks_url", u, "error", err)
			}
		},
	})
	if err != nil {
		kcancel()
		err = fmt.Errorf("fetch the issuer's keys from %s: %w", jwksURL, err)
		rs.failed, rs.failedAt = err, time.Now()
		return nil, err
	}
	rs.stopKeys = kcancel
	// Encryption keys never verify a signature.
	rs.keys, err = keyfunc.New(keyfunc.Options{Ctx: kctx, Storage: keys.Storage(), UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	rs.log.Info("checking access tokens with the issuer's keys", "issuer", rs.o.Issuer, "jwks_url", jwksURL)
	return rs.keys, err
}

// discoverJWKS finds the issuer's jwks_uri in its authorization server
// metadata (RFC 8414: the well-known suffix between host and path), else in
// its OpenID configuration (appended to the issuer); the metadata must name
// the same issuer (RFC 8414 §3.3).
func discoverJWKS(ctx context.Context, hc *http.Client, issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return "", fmt.Errorf("parse issuer %q: %w", issuer, err)
	}
	base := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	var errs []error
	for _, mdURL := range []string{
		base + "/.well-known/oauth-authorization-server" + p,
		strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration",
	} {
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := getJSON(ctx, hc, mdURL, &md); err != nil {
			errs = append(errs, err)
			continue
		}
		if md.Issuer != issuer {
			return "", fmt.Errorf("metadata at %s names issuer %q, not %q", mdURL, md.Issuer, issuer)
		}
		if md.JWKSURI == "" {
			return "", fmt.Errorf("metadata at %s has no jwks_uri; set jwks_url in the oauth block", mdURL)
		}
		return md.JWKSURI, nil
	}
	return "", fmt.Errorf("discover the issuer's metadata: %w", errors.Join(errs...))
}

// getJSON fetches a small JSON document.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, oauthFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", u, res.Status)
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", u, err)
	}
	return nil
}
