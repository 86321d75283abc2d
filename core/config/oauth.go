package config

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"

	"github.com/hashicorp/hcl/v2"
)

// OAuth grants: how cexecd gets an access token for a server.
const (
	// GrantAuthorizationCode signs a user in through a browser
	// (`cexecctl auth login`), with PKCE.
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials is machine-to-machine: cexecd asks the token
	// endpoint itself with the client's id and secret.
	GrantClientCredentials = "client_credentials"
)

// OAuth is the `oauth { ... }` block of an http or sse mcp_server.
type OAuth struct {
	// ClientID and ClientSecret are pre-registered credentials; without a
	// client id cexecd uses ClientMetadataURL when the authorization server
	// supports client ID metadata documents, else dynamic registration.
	ClientID     string
	ClientSecret string
	// ClientMetadataURL is the https URL of this client's metadata document,
	// used as its client_id where the server supports that.
	ClientMetadataURL string
	// AssertionKey is a PEM private key (PKCS#8 or SEC 1 EC P-256, or
	// RSA) the client signs JWT assertions with (private_key_jwt, RFC
	// 7523) instead of sending a secret.
	AssertionKey string
	// AuthMethod is how the client authenticates at the token endpoint
	// ("client_secret_basic", "client_secret_post", "private_key_jwt",
	// "none"); "" chooses from the server's metadata.
	AuthMethod string
	// Scopes are the scopes requested; nil means the server's challenge,
	// else its metadata's scopes_supported, else none.
	Scopes []string
	// RedirectPort is the loopback port of the sign-in redirect; 0 picks a
	// free one per sign-in.
	RedirectPort int
	// Grant is GrantAuthorizationCode or GrantClientCredentials.
	Grant     string
	DeclRange hcl.Range
}

// rawOAuth is the undecoded oauth block.
type rawOAuth struct {
	ClientID          *hcl.Attribute `hcl:"client_id,optional"`
	ClientSecret      *hcl.Attribute `hcl:"client_secret,optional"`
	ClientMetadataURL *hcl.Attribute `hcl:"client_metadata_url,optional"`
	AuthMethod        *hcl.Attribute `hcl:"token_endpoint_auth_method,optional"`
	AssertionKey      *hcl.Attribute `hcl:"client_assertion_key,optional"`
	Scopes            *hcl.Attribute `hcl:"scopes,optional"`
	RedirectPort      *hcl.Attribute `hcl:"redirect_port,optional"`
	Grant             *hcl.Attribute `hcl:"grant,optional"`
	DeclRange         hcl.Range      `hcl:",def_range"`
}

// oauth decodes and checks s's oauth block.
func (d *decoder) oauth(s *MCPServer, r *rawMCP, base []string) {
	raw := r.OAuth
	if raw == nil {
		return
	}
	if s.Transport == TransportStdio {
		d.errorf(raw.DeclRange.Ptr(), "OAuth needs a remote server", "mcp_server %q: oauth applies to http and sse servers only; a local server gets its credentials through env.", s.Name)
		return
	}
	base = append(base, "oauth")
	o := &OAuth{Grant: GrantAuthorizationCode, DeclRange: raw.DeclRange}
	o.ClientID, _, _ = d.str(raw.ClientID, append(base, "client_id"))
	var marked bool
	o.ClientSecret, marked, _ = d.str(raw.ClientSecret, append(base, "client_secret"))
	if o.ClientSecret != "" && !marked {
		d.warnf(raw.ClientSecret.Range.Ptr(), "Secret written in the file", "Write client_secret as env(\"NAME\") so the secret stays out of cexec.hcl (and its backups and diffs).")
	}
	if v, marked, ok := d.str(raw.AssertionKey, append(base, "client_assertion_key")); ok {
		if !marked {
			d.warnf(raw.AssertionKey.Range.Ptr(), "Secret written in the file", "Write client_assertion_key as env(\"NAME\") so the private key stays out of cexec.hcl (and its backups and diffs).")
		}
		if _, err := ParseAssertionKey(v); err != nil {
			d.errorf(raw.AssertionKey.Expr.Range().Ptr(), "Invalid client_assertion_key", "mcp_server %q: %s.", s.Name, err)
		} else {
			o.AssertionKey = v
		}
	}
	if v, _, ok := d.str(raw.ClientMetadataURL, append(base, "client_metadata_url")); ok {
		if !isHTTPSURLWithPath(v) {
			d.errorf(raw.ClientMetadataURL.Expr.Range().Ptr(), "Invalid client_metadata_url", "mcp_server %q: client_metadata_url must be an https URL with a path, like \"https://app.example.com/oauth/client.json\"; got %q.", s.Name, v)
		} else {
			o.ClientMetadataURL = v
		}
	}
	if v, _, ok := d.str(raw.AuthMethod, append(base, "token_endpoint_auth_method")); ok {
		switch v {
		case "client_secret_basic", "client_secret_post", "private_key_jwt", "none":
			o.AuthMethod = v
		default:
			d.errorf(raw.AuthMethod.Expr.Range().Ptr(), "Invalid token_endpoint_auth_method", "mcp_server %q: token_endpoint_auth_method must be \"client_secret_basic\", \"client_secret_post\", \"private_key_jwt\" or \"none\"; got %q.", s.Name, v)
		}
	}
	if l, ok := d.strList(raw.Scopes, append(base, "scopes")); ok {
		o.Scopes = l
	}
	if n, ok := d.integer(raw.RedirectPort, append(base, "redirect_port"), 0); ok {
		if n > 65535 {
			d.errorf(raw.RedirectPort.Expr.Range().Ptr(), "Number out of range", "mcp_server %q: redirect_port must be a TCP port (1-65535), or 0 for any free one; got %d.", s.Name, n)
		}
		o.RedirectPort = n
	}
	if v, _, ok := d.str(raw.Grant, append(base, "grant")); ok {
		switch v {
		case GrantAuthorizationCode, GrantClientCredentials:
			o.Grant = v
		default:
			d.errorf(raw.Grant.Expr.Range().Ptr(), "Invalid grant", "mcp_server %q: grant must be %q (a user signs in) or %q (machine to machine); got %q.", s.Name, GrantAuthorizationCode, GrantClientCredentials, v)
		}
	}
	if o.Grant == GrantClientCredentials && (o.ClientID == "" || (o.ClientSecret == "" && o.AssertionKey == "")) {
		d.errorf(raw.DeclRange.Ptr(), "Client credentials need a client", "mcp_server %q: grant = %q needs client_id and client_secret or client_assertion_key (write them as env(\"NAME\")).", s.Name, GrantClientCredentials)
	}
	if o.AuthMethod == "private_key_jwt" && o.AssertionKey == "" && raw.AssertionKey == nil {
		d.errorf(raw.AuthMethod.Expr.Range().Ptr(), "private_key_jwt needs a key", "mcp_server %q: token_endpoint_auth_method = \"private_key_jwt\" signs with client_assertion_key; set it.", s.Name)
	}
	s.OAuth = o
}

// ParseAssertionKey parses a PEM private key for JWT client assertions:
// EC P-256 (ES256) or RSA (RS256), PKCS#8, SEC 1 or PKCS#1.
func ParseAssertionKey(pemText string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("client_assertion_key is not a PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("client_assertion_key: %w", err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("client_assertion_key: EC keys must be on P-256 (ES256)")
		}
		return k, nil
	case *rsa.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("client_assertion_key: %T keys are not supported; use EC P-256 or RSA", key)
}

// isHTTPSURLWithPath reports whether s is an absolute https URL with a
// path, the form a client ID metadata document's URL must have.
func isHTTPSURLWithPath(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" && u.Fragment == ""
}
