package config

import (
	"net/url"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// MCPOAuth is the mcp block's `oauth { ... }` block: cexecd as an OAuth 2.1
// resource server. Agents sign in at the issuer and send its JWT access
// tokens; the face checks them against the issuer's keys (RFC 9068 style)
// and takes the tenant from a claim.
type MCPOAuth struct {
	// Issuer is the authorization server's issuer identifier: the tokens'
	// iss, and where its metadata (RFC 8414 or OpenID discovery) is found.
	Issuer string
	// JWKSURL is where the issuer's signing keys are; "" discovers it from
	// the issuer's metadata (jwks_uri).
	JWKSURL string
	// Audience is the face's public URL, e.g. "https://mcp.example.com/mcp":
	// the audience tokens must carry and the resource its protected resource
	// metadata (RFC 9728) names. It is configured, never taken from a
	// request, so a token minted for another server is refused.
	Audience string
	// TenantClaim is the claim whose string value is the tenant.
	TenantClaim string
	// RequiredScopes must all be granted (scope or scp claim).
	RequiredScopes []string
	DeclRange      hcl.Range
}

// rawMCPOAuth is the oauth block inside the mcp block.
type rawMCPOAuth struct {
	Issuer         *hcl.Attribute `hcl:"issuer,optional"`
	JWKSURL        *hcl.Attribute `hcl:"jwks_url,optional"`
	Audience       *hcl.Attribute `hcl:"audience,optional"`
	TenantClaim    *hcl.Attribute `hcl:"tenant_claim,optional"`
	RequiredScopes *hcl.Attribute `hcl:"required_scopes,optional"`
	DeclRange      hcl.Range      `hcl:",def_range"`
}

func (d *decoder) mcpOAuth(m *MCP, raw *rawMCPOAuth) {
	if raw == nil {
		return
	}
	o := &MCPOAuth{DeclRange: raw.DeclRange}
	base := path("mcp", "oauth")
	ok := true
	for _, u := range []struct {
		attr     *hcl.Attribute
		name     string
		dst      *string
		required bool
		example  string
	}{
		{raw.Issuer, "issuer", &o.Issuer, true, "https://login.example.com/realms/cexec"},
		{raw.JWKSURL, "jwks_url", &o.JWKSURL, false, "https://login.example.com/realms/cexec/protocol/openid-connect/certs"},
		{raw.Audience, "audience", &o.Audience, true, "https://mcp.example.com/mcp"},
	} {
		if u.attr == nil {
			if u.required {
				d.errorf(raw.DeclRange.Ptr(), "Missing required argument",
					"The oauth block needs %s, like %s = %q.", u.name, u.name, u.example)
				ok = false
			}
			continue
		}
		s, _, good := d.str(u.attr, append(base, u.name))
		if !good {
			ok = false
			continue
		}
		if msg := checkOAuthURL(s); msg != "" {
			d.errorf(u.attr.Expr.Range().Ptr(), "Invalid URL", "%s must be %s, like %q; got %q.", u.name, msg, u.example, s)
			ok = false
			continue
		}
		*u.dst = s
	}
	if raw.TenantClaim == nil {
		d.errorf(raw.DeclRange.Ptr(), "Missing required argument",
			"The oauth block needs tenant_claim, the claim that names the tenant, like tenant_claim = \"tenant\".")
		ok = false
	} else if s, _, good := d.str(raw.TenantClaim, append(base, "tenant_claim")); good && s != "" {
		o.TenantClaim = s
	} else {
		if good {
			d.errorf(raw.TenantClaim.Expr.Range().Ptr(), "Empty claim name", "tenant_claim names the claim that holds the tenant, like \"tenant\".")
		}
		ok = false
	}
	if l, good := d.strList(raw.RequiredScopes, append(base, "required_scopes")); good {
		for i, s := range l {
			if s == "" || strings.ContainsAny(s, " \t\"\\") {
				d.errorf(elemRange(raw.RequiredScopes.Expr, i).Ptr(), "Invalid scope",
					"A scope is a non-empty word without spaces, quotes or backslashes (RFC 6749 §3.3), like \"mcp\"; got %q.", s)
				ok = false
				continue
			}
			o.RequiredScopes = append(o.RequiredScopes, s)
		}
	}
	if ok {
		m.OAuth = o
	}
}

// checkOAuthURL says what is wrong with an issuer, JWKS or audience URL, or
// "": https, or http on a loopback host (a local identity provider), with a
// host and no query or fragment.
func checkOAuthURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "an absolute https URL without user, query or fragment"
	case u.Scheme == "https", u.Scheme == "http" && loopbackHost(u.Hostname()):
		return ""
	}
	return "an https URL (http only on a loopback host)"
}
