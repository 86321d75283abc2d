package config

import (
	"slices"
	"strings"
	"testing"
)

func TestMCPFixture(t *testing.T) {
	env := fakeEnv(map[string]string{"CEXEC_TEST_TOKEN": "s3cret-token"})
	cfg, diags := Load("testdata/mcp.hcl", Overrides{LookupEnv: env})
	checkDiags(t, diags, []wantDiag{{8, "Token written in the file", true}})
	m := cfg.MCP
	if m.Listen != "0.0.0.0:8443" || m.SSE ||
		!slices.Equal(m.AllowedOrigins, []string{"https://app.example.com", "http://localhost:5173"}) ||
		!slices.Equal(m.Tokens, []MCPToken{{"s3cret-token", "acme"}, {"written-in-the-file", "default"}}) {
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
	})
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
