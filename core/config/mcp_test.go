package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMCPFixture(t *testing.T) {
	env := fakeEnv(map[string]string{"CEXEC_TEST_TOKEN": "s3cret-token"})
	cfg, diags := Load("testdata/mcp.hcl", Overrides{LookupEnv: env})
	checkDiags(t, diags, []wantDiag{{8, "Token written in the file", true}})
	m := cfg.MCP
	if m.Listen != "0.0.0.0:8443" || m.SSE ||
		!slices.Equal(m.AllowedOrigins, []string{"https://app.example.com", "http://localhost:5173"}) ||
		!slices.Equal(m.Tokens, []MCPToken{{"s3cret-token", "acme"}, {"written-in-the-file", "default"}}) ||
		m.ReadHeaderTimeout != 5*time.Second || m.ReadTimeout != time.Minute || m.IdleTimeout != 90*time.Second ||
		m.MaxConnections != 256 || m.MaxConnectionsPerPeer != 16 || m.MaxRequestBody != 1<<20 || m.MaxSessionsPerTenant != 8 ||
		m.SessionIdleTimeout != 20*time.Minute {
		t.Errorf("MCP = %+v", m)
	}
	out, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cret-token", "written-in-the-file"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("MaskedJSON shows token %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(string(out), `"tenant": "acme"`) || !strings.Contains(string(out), `"listen": "0.0.0.0:8443"`) {
		t.Errorf("MaskedJSON lacks the mcp block:\n%s", out)
	}

	_, diags = Load("testdata/mcp_invalid.hcl", Overrides{LookupEnv: env})
	checkDiags(t, diags, []wantDiag{
		{4, "Invalid origin", false},
		{4, "Invalid origin", false},
		{6, "Empty token", false},
		{7, "Invalid tenant id", false},
		{9, "Duplicate token", false},
		{11, "Invalid duration", false},
		{12, "Invalid duration", false},
		{13, "Number out of range", false},
		{14, "Invalid number", false},
		{15, "Invalid size", false},
		{16, "Incorrect attribute value type", false},
	})
}

// TestMCPLimitDefaults: the limits hold without an mcp block (the unix
// socket) and when the block leaves them out.
func TestMCPLimitDefaults(t *testing.T) {
	want := MCP{
		ReadHeaderTimeout: DefaultMCPReadHeaderTimeout, ReadTimeout: DefaultMCPReadTimeout, IdleTimeout: DefaultMCPIdleTimeout,
		MaxConnections: DefaultMCPMaxConnections, MaxConnectionsPerPeer: DefaultMCPMaxConnectionsPerPeer,
		MaxRequestBody: DefaultMCPMaxRequestBody, MaxSessionsPerTenant: DefaultMCPMaxSessionsPerTenant,
		SessionIdleTimeout: DefaultMCPSessionIdleTimeout,
	}
	for _, src := range []string{"", "mcp {}\n"} {
		cfg, diags := load([]byte(src), "t.hcl", Overrides{})
		checkDiags(t, diags, nil)
		got := cfg.MCP
		got.Listen, got.SSE, got.DeclRange = "", false, want.DeclRange
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: MCP = %+v, want %+v", src, got, want)
		}
	}
	_, diags := load([]byte("mcp {\n  max_connections = 4\n  max_connections_per_peer = 8\n}\n"), "t.hcl", Overrides{})
	checkDiags(t, diags, []wantDiag{{3, "Per-peer connections above maximum", false}})
}

func TestMCPBlock(t *testing.T) {
	env := fakeEnv(map[string]string{"T": "tok"})
	tests := []struct {
		name   string
		src    string
		listen string
		sse    bool
		want   []wantDiag
	}{
		{"no block: unix socket only", "", "", true, nil},
		{"empty block: loopback default", "mcp {}\n", DefaultMCPListen, true, nil},
		{"listen disabled", "mcp {\n  listen = \"\"\n}\n", "", true, nil},
		{"localhost", "mcp {\n  listen = \"localhost:9000\"\n}\n", "localhost:9000", true, nil},
		{"ipv6 loopback", "mcp {\n  listen = \"[::1]:9000\"\n}\n", "[::1]:9000", true, nil},
		{"all interfaces without tokens", "mcp {\n  listen = \"0.0.0.0:9000\"\n}\n", "0.0.0.0:9000", true,
			[]wantDiag{{2, "Refusing to serve MCP on a non-loopback address without auth", false}}},
		{"all interfaces with a token", "mcp {\n  listen = \":9000\"\n  tokens = [{ token = env(\"T\"), tenant = \"a\" }]\n}\n", ":9000", true, nil},
		{"no port", "mcp {\n  listen = \"127.0.0.1\"\n}\n", "127.0.0.1", true, []wantDiag{{2, "Invalid listen address", false}}},
		{"bad port", "mcp {\n  listen = \"127.0.0.1:http2\"\n}\n", "127.0.0.1:http2", true, []wantDiag{{2, "Invalid listen address", false}}},
		{"token without tenant", "mcp {\n  tokens = [{ token = env(\"T\") }]\n}\n", DefaultMCPListen, true,
			[]wantDiag{{2, "Incorrect attribute value type", false}}},
		{"sse off", "mcp {\n  sse = false\n}\n", DefaultMCPListen, false, nil},
		{"unknown attribute", "mcp {\n  port = 1\n}\n", DefaultMCPListen, true, []wantDiag{{2, "Unsupported argument", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := load([]byte(tt.src), "t.hcl", Overrides{LookupEnv: env})
			checkDiags(t, diags, tt.want)
			if cfg.MCP.Listen != tt.listen || cfg.MCP.SSE != tt.sse {
				t.Errorf("listen %q sse %v, want %q %v", cfg.MCP.Listen, cfg.MCP.SSE, tt.listen, tt.sse)
			}
		})
	}
}

func TestMCPOAuthFixture(t *testing.T) {
	cfg, diags := Load("testdata/mcp_oauth.hcl", Overrides{})
	checkDiags(t, diags, nil)
	want := MCPOAuth{
		Issuer: "https://login.example.com/realms/cexec", Audience: "https://mcp.example.com/mcp",
		TenantClaim: "cexec_tenant", RequiredScopes: []string{"mcp", "cexec:run"},
	}
	got := cfg.MCP.OAuth
	if got == nil {
		t.Fatal("no oauth block decoded")
	}
	if got.DeclRange.Start.Line != 4 {
		t.Errorf("oauth block at line %d, want 4", got.DeclRange.Start.Line)
	}
	got.DeclRange = want.DeclRange
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("OAuth = %+v, want %+v", *got, want)
	}
	out, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"audience": "https://mcp.example.com/mcp"`) {
		t.Errorf("MaskedJSON lacks the oauth block:\n%s", out)
	}

	_, diags = Load("testdata/mcp_oauth_invalid.hcl", Overrides{})
	checkDiags(t, diags, []wantDiag{
		{5, "Invalid URL", false},
		{6, "Invalid URL", false},
		{7, "Invalid URL", false},
		{8, "Empty claim name", false},
		{9, "Invalid scope", false},
	})
}

func TestMCPOAuthBlock(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"loopback http issuer and discovery", "mcp {\n  oauth {\n    issuer = \"http://127.0.0.1:9000\"\n    audience = \"http://localhost:7797/mcp\"\n    tenant_claim = \"t\"\n  }\n}\n", nil},
		{"missing issuer and audience", "mcp {\n  oauth {\n    tenant_claim = \"t\"\n  }\n}\n",
			[]wantDiag{{2, "Missing required argument", false}, {2, "Missing required argument", false}}},
		{"missing tenant claim", "mcp {\n  oauth {\n    issuer = \"https://a.example\"\n    audience = \"https://b.example/mcp\"\n  }\n}\n",
			[]wantDiag{{2, "Missing required argument", false}}},
		{"two oauth blocks", "mcp {\n  oauth {\n  }\n  oauth {\n  }\n}\n",
			[]wantDiag{{4, "Duplicate oauth block", false}}},
		{"query in the audience", "mcp {\n  oauth {\n    issuer = \"https://a.example\"\n    audience = \"https://b.example/mcp?x=1\"\n    tenant_claim = \"t\"\n  }\n}\n",
			[]wantDiag{{4, "Invalid URL", false}}},
		{"all interfaces with oauth only", "mcp {\n  listen = \":9000\"\n  oauth {\n    issuer = \"https://a.example\"\n    audience = \"https://b.example/mcp\"\n    tenant_claim = \"t\"\n  }\n}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := load([]byte(tt.src), "t.hcl", Overrides{})
			checkDiags(t, diags, tt.want)
			if tt.want == nil && cfg.MCP.OAuth == nil {
				t.Error("no oauth block decoded")
			}
		})
	}
}
