package config

import "testing"

// TestBuiltinServer: a built-in server's block needs only its transport and
// runs one instance per tenant.
func TestBuiltinServer(t *testing.T) {
	cfg, diags := load([]byte(`mcp_server "forms" {
  transport    = "builtin"
  idle_timeout = "2m"
}
`), "builtin.hcl", Overrides{LookupEnv: fakeEnv(nil)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s := cfg.MCPServer("forms")
	if s.Transport != TransportBuiltin || s.Scope != ScopeTenant || s.IdleTimeout.Minutes() != 2 || s.MaxInstances != DefaultMaxInstances {
		t.Errorf("server %+v", s)
	}
	if got, err := cfg.ServerForTenant("forms", "acme"); err != nil || got.Transport != TransportBuiltin {
		t.Errorf("for tenant: %+v %v", got, err)
	}
}
