package config

import (
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/cexec/cexec/api/endpoint"
)

// DefaultMCPListen is where cexecd serves MCP over TCP when the mcp block
// does not say: loopback only.
const DefaultMCPListen = "127.0.0.1:7797"

// Defaults of the mcp block's limits. They hold without the block too: the
// unix socket is served with the same timeouts.
const (
	// DefaultMCPReadHeaderTimeout closes a connection that sent no
	// (complete) request header in time, e.g. one that sent nothing.
	DefaultMCPReadHeaderTimeout = 10 * time.Second
	// DefaultMCPReadTimeout bounds reading a whole request, body included.
	DefaultMCPReadTimeout = 30 * time.Second
	// DefaultMCPIdleTimeout closes a keep-alive connection between requests.
	DefaultMCPIdleTimeout = 2 * time.Minute
	// DefaultMCPMaxConnections caps the TCP listener's open connections.
	DefaultMCPMaxConnections = 1024
	// DefaultMCPMaxConnectionsPerPeer caps one peer IP's TCP connections.
	DefaultMCPMaxConnectionsPerPeer = 64
	// DefaultMCPMaxRequestBody caps a request body.
	DefaultMCPMaxRequestBody = 4 << 20
	// DefaultMCPMaxSessionsPerTenant caps one tenant's live MCP sessions.
	DefaultMCPMaxSessionsPerTenant = 64
	// DefaultMCPSessionIdleTimeout ends a streamable HTTP session with no
	// request for this long: an agent may think between turns.
	DefaultMCPSessionIdleTimeout = time.Hour
)

// MCP is the `mcp { ... }` block: how agents reach cexecd's MCP face over
// the network. The face is always served on a unix socket next to the
// control socket (for `cexecctl mcp`); the block adds a TCP listener.
type MCP struct {
	// Listen is the TCP address (host:port) of the streamable HTTP (and SSE)
	// endpoint; "" when the block is absent or sets listen = "", which
	// serves MCP on the unix socket only.
	Listen string
	// Tokens map bearer tokens to tenants. A non-loopback Listen requires
	// at least one, or OAuth.
	Tokens []MCPToken
	// OAuth, when set, also accepts JWT access tokens of an identity
	// provider; nil without an oauth block.
	OAuth *MCPOAuth
	// AllowedOrigins are the browser origins (scheme://host[:port])
	// accepted; localhost ones only when listed.
	AllowedOrigins []string
	// SSE also serves the HTTP+SSE transport older clients use.
	SSE bool
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout are the HTTP server's
	// timeouts on both listeners. There is no write timeout: it would cut
	// the long-lived GET and SSE streams.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// MaxConnections and MaxConnectionsPerPeer cap the TCP listener's
	// connections, overall and per peer IP.
	MaxConnections        int
	MaxConnectionsPerPeer int
	// MaxRequestBody caps a request body in bytes.
	MaxRequestBody int64
	// MaxSessionsPerTenant caps one tenant's live MCP sessions.
	MaxSessionsPerTenant int
	// SessionIdleTimeout ends a streamable HTTP session without requests
	// for this long.
	SessionIdleTimeout time.Duration
	DeclRange          hcl.Range
}

// MCPToken maps a bearer token (a secret: write it as env("NAME")) to a
// tenant.
type MCPToken struct {
	Token  string
	Tenant string
}

var mcpTokenType = cty.List(cty.Object(map[string]cty.Type{"token": cty.String, "tenant": cty.String}))

func (d *decoder) mcp(cfg *Config, raw *rawMCPFace) {
	m := &cfg.MCP
	m.SSE = true
	m.ReadHeaderTimeout = DefaultMCPReadHeaderTimeout
	m.ReadTimeout = DefaultMCPReadTimeout
	m.IdleTimeout = DefaultMCPIdleTimeout
	m.MaxConnections = DefaultMCPMaxConnections
	m.MaxConnectionsPerPeer = DefaultMCPMaxConnectionsPerPeer
	m.MaxRequestBody = DefaultMCPMaxRequestBody
	m.MaxSessionsPerTenant = DefaultMCPMaxSessionsPerTenant
	m.SessionIdleTimeout = DefaultMCPSessionIdleTimeout
	if raw == nil {
		return
	}
	m.DeclRange = raw.DeclRange
	m.Listen = DefaultMCPListen
	base := path("mcp")
	if s, _, ok := d.str(raw.Listen, append(base, "listen")); ok {
		m.Listen = s
	}
	if b, ok := d.boolean(raw.SSE, append(base, "sse")); ok {
		m.SSE = b
	}
	if l, ok := d.strList(raw.AllowedOrigins, append(base, "allowed_origins")); ok {
		for i, o := range l {
			if !validOrigin(o) {
				d.errorf(elemRange(raw.AllowedOrigins.Expr, i).Ptr(), "Invalid origin",
					"allowed_origins entries are scheme://host[:port] with scheme http or https and nothing after, like \"https://app.example.com\"; got %q.", o)
				continue
			}
			m.AllowedOrigins = append(m.AllowedOrigins, o)
		}
	}
	d.mcpLimits(m, raw)
	d.mcpTokens(m, raw.Tokens)
	d.mcpOAuth(m, raw.OAuth)
	if m.Listen != "" {
		d.checkMCPListen(m, raw)
	}
}

func (d *decoder) mcpLimits(m *MCP, raw *rawMCPFace) {
	base := path("mcp")
	for _, t := range []struct {
		attr *hcl.Attribute
		name string
		dst  *time.Duration
	}{
		{raw.ReadHeaderTimeout, "read_header_timeout", &m.ReadHeaderTimeout},
		{raw.ReadTimeout, "read_timeout", &m.ReadTimeout},
		{raw.IdleTimeout, "idle_timeout", &m.IdleTimeout},
		{raw.SessionIdleTimeout, "session_idle_timeout", &m.SessionIdleTimeout},
	} {
		if v, ok := d.duration(t.attr, append(base, t.name)); ok {
			*t.dst = v
		}
	}
	for _, n := range []struct {
		attr *hcl.Attribute
		name string
		dst  *int
	}{
		{raw.MaxConnections, "max_connections", &m.MaxConnections},
		{raw.MaxConnectionsPerPeer, "max_connections_per_peer", &m.MaxConnectionsPerPeer},
		{raw.MaxSessionsPerTenant, "max_sessions_per_tenant", &m.MaxSessionsPerTenant},
	} {
		if v, ok := d.integer(n.attr, append(base, n.name), 1); ok {
			*n.dst = v
		}
	}
	if v, ok := d.size(raw.MaxRequestBody, append(base, "max_request_body")); ok {
		m.MaxRequestBody = v
	}
	if m.MaxConnectionsPerPeer > m.MaxConnections && raw.MaxConnectionsPerPeer != nil {
		d.errorf(raw.MaxConnectionsPerPeer.Expr.Range().Ptr(), "Per-peer connections above maximum",
			"max_connections_per_peer (%d) must not exceed max_connections (%d).", m.MaxConnectionsPerPeer, m.MaxConnections)
	}
}

func (d *decoder) mcpTokens(m *MCP, attr *hcl.Attribute) {
	p := path("mcp", "tokens")
	v, _, ok := d.eval(attr, mcpTokenType, p)
	if !ok {
		return
	}
	for i, e := range v.AsValueSlice() {
		rng := elemRange(attr.Expr, i).Ptr()
		tok, tenant := e.GetAttr("token"), e.GetAttr("tenant")
		if tok.IsNull() || tok.AsString() == "" {
			d.errorf(rng, "Empty token", "Every mcp token needs a non-empty token, e.g. token = env(%q).", endpoint.TokenEnv)
			continue
		}
		if tenant.IsNull() {
			d.errorf(rng, "Missing tenant", "Every mcp token names the tenant it acts as, e.g. tenant = \"default\".")
			continue
		}
		// MaskedJSON masks every token, wherever it came from.
		if !d.marked(append(slices.Clone(p), strconv.Itoa(i), "token")) {
			d.warnf(rng, "Token written in the file", "Write mcp tokens as env(\"NAME\") so the secret stays out of cexec.hcl (and its backups and diffs).")
		}
		if err := ValidateTenantID(tenant.AsString()); err != nil {
			d.errorf(rng, "Invalid tenant id", "%s.", err)
			continue
		}
		if slices.ContainsFunc(m.Tokens, func(t MCPToken) bool { return t.Token == tok.AsString() }) {
			d.errorf(rng, "Duplicate token", "The same token appears twice in mcp.tokens; each token maps to exactly one tenant.")
			continue
		}
		m.Tokens = append(m.Tokens, MCPToken{Token: tok.AsString(), Tenant: tenant.AsString()})
	}
}

// marked reports whether the value at p came from env().
func (d *decoder) marked(p []string) bool {
	return slices.ContainsFunc(d.sensitive, func(s []string) bool { return slices.Equal(s, p) })
}

func (d *decoder) checkMCPListen(m *MCP, raw *rawMCPFace) {
	subject := raw.DeclRange.Ptr()
	if raw.Listen != nil {
		subject = raw.Listen.Expr.Range().Ptr()
	}
	host, port, err := net.SplitHostPort(m.Listen)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = net.InvalidAddrError("bad port")
		}
	}
	if err != nil {
		d.errorf(subject, "Invalid listen address", "mcp listen must be host:port, like %q; got %q.", DefaultMCPListen, m.Listen)
		return
	}
	if len(m.Tokens) == 0 && m.OAuth == nil && raw.OAuth == nil && !loopbackHost(host) {
		d.errorf(subject, "Refusing to serve MCP on a non-loopback address without auth",
			"listen = %q is reachable from other machines; add tokens = [{ token = env(%q), tenant = %q }] or an oauth block to the mcp block, or listen on 127.0.0.1.", m.Listen, endpoint.TokenEnv, endpoint.DefaultTenant)
	}
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func validOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		(u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == ""
}
