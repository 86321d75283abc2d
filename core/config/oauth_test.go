package config

import (
	"bytes"
	"slices"
	"testing"
)

func TestOAuthBlock(t *testing.T) {
	src := `
cexec { data_dir = "/var/lib/cexec" }
mcp_server "github" {
  url   = "https://mcp.example.com/mcp"
  scope = "tenant"
  oauth {
    client_id     = "cexec-app"
    client_secret = env("GH_SECRET")
    scopes        = ["repo", "read:org"]
    redirect_port = 8765
    token_endpoint_auth_method = "client_secret_post"
  }
}
mcp_server "m2m" {
  url = "https://api.example.com/sse"
  oauth {
    grant         = "client_credentials"
    client_id     = "svc"
    client_secret = env("GH_SECRET")
  }
}
mcp_server "plain" { url = "https://plain.example.com/mcp" }
`
	cfg, diags := load([]byte(src), "/etc/cexec/cexec.hcl", Overrides{LookupEnv: fakeEnv(map[string]string{"GH_SECRET": "s3cret-oauth"})})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	o := cfg.MCPServer("github").OAuth
	if o == nil || o.ClientID != "cexec-app" || o.ClientSecret != "s3cret-oauth" || !slices.Equal(o.Scopes, []string{"repo", "read:org"}) ||
		o.RedirectPort != 8765 || o.AuthMethod != "client_secret_post" || o.Grant != GrantAuthorizationCode {
		t.Errorf("github oauth: %+v", o)
	}
	// A tenant's instance signs in with the same client.
	ts, err := cfg.ServerForTenant("github", "acme")
	if err != nil || ts.OAuth != o {
		t.Errorf("ServerForTenant: %+v %v", ts, err)
	}
	if m := cfg.MCPServer("m2m").OAuth; m == nil || m.Grant != GrantClientCredentials || m.Scopes != nil {
		t.Errorf("m2m oauth: %+v", m)
	}
	if cfg.MCPServer("plain").OAuth != nil {
		t.Error("a server without the block got OAuth")
	}
	masked, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(masked, []byte("s3cret-oauth")) {
		t.Error("the effective config shows client_secret")
	}
}
