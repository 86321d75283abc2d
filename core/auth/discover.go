package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// metadata is what discovery found for one server.
type metadata struct {
	// resource is the RFC 8707 resource indicator: the protected resource
	// metadata's resource, else the server's URL.
	resource        string
	scopesSupported []string // the protected resource's
	as              asMetadata
}

type prmDoc struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

type asMetadata struct {
	Issuer                  string   `json:"issuer"`
	AuthorizationEndpoint   string   `json:"authorization_endpoint"`
	TokenEndpoint           string   `json:"token_endpoint"`
	RegistrationEndpoint    string   `json:"registration_endpoint"`
	ScopesSupported         []string `json:"scopes_supported"`
	GrantTypes              []string `json:"grant_types_supported"`
	AuthMethods             []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethods    []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocSupp bool     `json:"client_id_metadata_document_supported"`
}

const maxMetadata = 1 << 20

// discover finds the authorization server of the MCP server at serverURL:
// the protected resource metadata named by the challenge, else at the
// path-based, else the root well-known URL; then the authorization server's
// metadata (RFC 8414 and OpenID discovery, path-inserted). A server with no
// protected resource metadata is taken, as in the 2025-03-26 spec, to be
// its own authorization server, with default endpoints when it has no
// metadata either.
func discover(ctx context.Context, hc *http.Client, serverURL string, ch challenge) (*metadata, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	origin := u.Scheme + "://" + u.Host
	var candidates []string
	if ch.resourceMetadata != "" {
		candidates = append(candidates, ch.resourceMetadata)
	}
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		candidates = append(candidates, origin+"/.well-known/oauth-protected-resource"+p)
	}
	candidates = append(candidates, origin+"/.well-known/oauth-protected-resource")
	var prm *prmDoc
	for _, c := range candidates {
		var d prmDoc
		ok, err := getJSON(ctx, hc, c, &d)
		if err != nil {
			return nil, err
		}
		if ok {
			prm = &d
			break
		}
	}
	md := &metadata{resource: serverURL}
	if prm == nil {
		as, err := asFor(ctx, hc, origin, false)
		if err != nil {
			return nil, err
		}
		if as == nil {
			as = &asMetadata{Issuer: origin, AuthorizationEndpoint: origin + "/authorize", TokenEndpoint: origin + "/token", RegistrationEndpoint: origin + "/register"}
		}
		md.as = *as
		return md, nil
	}
	if prm.Resource != "" {
		// RFC 9728 §3.3: metadata naming another resource must not be used,
		// or a server could have tokens minted for someone else's.
		if !bindsTo(prm.Resource, serverURL) {
			return nil, fmt.Errorf("protected resource metadata names resource %q, which is not %s", prm.Resource, serverURL)
		}
		md.resource = prm.Resource
	}
	md.scopesSupported = prm.ScopesSupported
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("protected resource metadata lists no authorization_servers")
	}
	as, err := asFor(ctx, hc, prm.AuthorizationServers[0], true)
	if err != nil {
		return nil, err
	}
	if as == nil {
		return nil, fmt.Errorf("authorization server %s publishes no metadata", prm.AuthorizationServers[0])
	}
	md.as = *as
	return md, nil
}

// bindsTo reports whether resource is serverURL or a path prefix of it on
// the same origin.
func bindsTo(resource, serverURL string) bool {
	r, err1 := url.Parse(resource)
	s, err2 := url.Parse(serverURL)
	if err1 != nil || err2 != nil || !strings.EqualFold(r.Scheme, s.Scheme) || !strings.EqualFold(r.Host, s.Host) {
		return false
	}
	rp, sp := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(s.Path, "/")
	return rp == sp || strings.HasPrefix(sp, rp+"/")
}

// asFor fetches the metadata of the authorization server issuer, nil when
// it publishes none.
func asFor(ctx context.Context, hc *http.Client, issuer string, checkIssuer bool) (*asMetadata, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("authorization server %q is not a URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.Trim(u.EscapedPath(), "/")
	var urls []string
	if p == "" {
		urls = []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	} else {
		urls = []string{
			origin + "/.well-known/oauth-authorization-server/" + p,
			origin + "/.well-known/openid-configuration/" + p,
			origin + "/" + p + "/.well-known/openid-configuration",
		}
	}
	for _, m := range urls {
		var as asMetadata
		ok, err := getJSON(ctx, hc, m, &as)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if checkIssuer && strings.TrimSuffix(as.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("authorization server metadata at %s names issuer %q, not %q", m, as.Issuer, issuer)
		}
		if as.AuthorizationEndpoint == "" && as.TokenEndpoint == "" {
			return nil, fmt.Errorf("authorization server metadata at %s has no endpoints", m)
		}
		return &as, nil
	}
	return nil, nil
}

// getJSON GETs u into v; ok is false on a non-200 answer.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) (ok bool, _ error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("fetch %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadata))
		return false, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(v); err != nil {
		return false, fmt.Errorf("metadata at %s: %w", u, err)
	}
	return true, nil
}
