package auth

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/cexec/cexec/core/config"
)

// client is the OAuth client cexecd is towards one authorization server.
type client struct {
	id, secret, method string
	// key and audience sign private_key_jwt assertions.
	key      crypto.Signer
	audience string
}

// chooseClient picks the client: the configured one, else the client ID
// metadata document where the server supports it, else a dynamic
// registration for redirectURI.
func chooseClient(ctx context.Context, hc *http.Client, o *config.OAuth, as *asMetadata, redirectURI string, scopes []string) (client, error) {
	if o.ClientID != "" {
		return configuredClient(o, as)
	}
	if o.ClientMetadataURL != "" && as.ClientIDMetadataDocSupp {
		return client{id: o.ClientMetadataURL, method: "none"}, nil
	}
	if as.RegistrationEndpoint == "" {
		return client{}, fmt.Errorf("authorization server %s offers no dynamic client registration; set client_id (and client_secret) in the server's oauth block", as.Issuer)
	}
	return register(ctx, hc, as, redirectURI, scopes)
}

// configuredClient is the pre-registered client of o.
func configuredClient(o *config.OAuth, as *asMetadata) (client, error) {
	c := client{id: o.ClientID, secret: o.ClientSecret, method: authMethod(o.AuthMethod, o.ClientSecret, as), audience: as.Issuer}
	if o.AssertionKey != "" {
		key, err := config.ParseAssertionKey(o.AssertionKey)
		if err != nil {
			return client{}, err
		}
		c.key = key
		if o.AuthMethod == "" {
			c.method = "private_key_jwt"
		}
	}
	return c, nil
}

// authMethod is how a client with secret authenticates at the token
// endpoint: as configured, else basic when the server lists only that of
// the two secret methods, else post; none without a secret.
func authMethod(configured, secret string, as *asMetadata) string {
	switch {
	case configured != "":
		return configured
	case secret == "":
		return "none"
	case slices.Contains(as.AuthMethods, "client_secret_basic") && !slices.Contains(as.AuthMethods, "client_secret_post"):
		return "client_secret_basic"
	case len(as.AuthMethods) == 0:
		return "client_secret_basic" // RFC 8414 §2: the default when unlisted
	}
	return "client_secret_post"
}

// register performs dynamic client registration (RFC 7591).
func register(ctx context.Context, hc *http.Client, as *asMetadata, redirectURI string, scopes []string) (client, error) {
	body := map[string]any{
		"client_name":                "cexec",
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	}
	if len(scopes) > 0 {
		body["scope"] = strings.Join(scopes, " ")
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.RegistrationEndpoint, bytes.NewReader(b))
	if err != nil {
		return client{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return client{}, fmt.Errorf("register client: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return client{}, fmt.Errorf("register client at %s: %s", as.RegistrationEndpoint, oauthError(resp.StatusCode, raw))
	}
	var r struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Method       string `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.ClientID == "" {
		return client{}, fmt.Errorf("register client at %s: answer has no client_id", as.RegistrationEndpoint)
	}
	c := client{id: r.ClientID, secret: r.ClientSecret, method: r.Method}
	if c.method == "" {
		c.method = authMethod("", c.secret, as)
	}
	return c, nil
}

// authorizeURL is the authorization request (PKCE S256, RFC 8707 resource).
func authorizeURL(as *asMetadata, c client, redirectURI, state, challenge, resource string, scopes []string) (string, error) {
	u, err := url.Parse(as.AuthorizationEndpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return "", fmt.Errorf("authorization endpoint %q is not an http(s) URL", as.AuthorizationEndpoint)
	}
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", c.id)
	q.Set("redirect_uri", redirectURI)
	q.Set("state", state)
	q.Set("code_challenge", challenge)
	q.Set("code_challenge_method", "S256")
	q.Set("resource", resource)
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// tokenRequest posts form to the token endpoint with c's credentials.
func tokenRequest(ctx context.Context, hc *http.Client, tokenURL string, c client, form url.Values) (*transport.Token, error) {
	if c.method != "client_secret_basic" {
		form.Set("client_id", c.id)
		if c.method == "client_secret_post" {
			form.Set("client_secret", c.secret)
		}
	}
	if c.method == "private_key_jwt" {
		if c.key == nil {
			return nil, errors.New("private_key_jwt needs client_assertion_key")
		}
		jwt, err := clientAssertion(c.key, c.id, c.audience)
		if err != nil {
			return nil, fmt.Errorf("sign client assertion: %w", err)
		}
		form.Set("client_assertion_type", assertionType)
		form.Set("client_assertion", jwt)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if c.method == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("token request (%s): %s", form.Get("grant_type"), oauthError(resp.StatusCode, raw))
	}
	var t transport.Token
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return nil, fmt.Errorf("token request (%s): %s", form.Get("grant_type"), oauthError(resp.StatusCode, raw))
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.AccessToken == "" {
		return nil, fmt.Errorf("token request (%s): answer has no access_token", form.Get("grant_type"))
	}
	if t.ExpiresIn > 0 {
		t.ExpiresAt = time.Now().Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return &t, nil
}

// oauthError words an OAuth error answer without echoing anything else of
// the body, which could hold a secret.
func oauthError(status int, raw []byte) string {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		if e.Description != "" {
			return fmt.Sprintf("%s (%s), HTTP %d", e.Error, e.Description, status)
		}
		return fmt.Sprintf("%s, HTTP %d", e.Error, status)
	}
	return fmt.Sprintf("HTTP %d", status)
}

// chooseScopes is the scope to ask for (MCP's scope selection strategy):
// the configured scopes, else the challenge's scope, else the protected
// resource's scopes_supported, else none.
func chooseScopes(o *config.OAuth, ch challenge, md *metadata) []string {
	if ch.err == "insufficient_scope" && ch.scope != "" {
		// Step-up: what the server now asks for, on top of what is configured.
		out := slices.Clone(o.Scopes)
		for _, sc := range strings.Fields(ch.scope) {
			if !slices.Contains(out, sc) {
				out = append(out, sc)
			}
		}
		return out
	}
	switch {
	case len(o.Scopes) > 0:
		return o.Scopes
	case ch.scope != "":
		return strings.Fields(ch.scope)
	case len(md.scopesSupported) > 0:
		return md.scopesSupported
	}
	return nil
}
