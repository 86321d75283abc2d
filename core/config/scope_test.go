package config

import (
	"bytes"
	"maps"
	"slices"
	"testing"
)

const scopedSrc = `
cexec { data_dir = "/var/lib/cexec" }
mcp_server "memory" {
  command = "npx"
  args    = ["server-memory", "--name", tenant.id]
  env     = { MEMORY_FILE_PATH = "${tenant.dir}/memory.jsonl", MODE = "x" }
  cwd     = tenant.dir
  scope   = "tenant"
  idle_timeout  = "30s"
  max_instances = 3
}
mcp_server "github" {
  url     = "https://mcp.example.com/mcp"
  headers = { Authorization = "Bearer ${env("SHARED_TOKEN")}", X-Tenant = tenant.id }
  scope   = "tenant"
}
mcp_server "plain" { command = "npx" }
tenant "acme" {
  mcp_server "memory" {
    env = { MODE = "acme-${tenant.id}" }
  }
  mcp_server "github" {
    headers = { Authorization = "Bearer ${env("ACME_TOKEN")}" }
  }
}
`

func TestServerForTenant(t *testing.T) {
	env := fakeEnv(map[string]string{"SHARED_TOKEN": "shared-secret", "ACME_TOKEN": "acme-secret"})
	cfg, diags := load([]byte(scopedSrc), "/etc/cexec/cexec.hcl", Overrides{LookupEnv: env})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	tests := []struct {
		server, tenant string
		args           []string
		env, headers   map[string]string
		cwd            string
	}{
		{"memory", "acme", []string{"server-memory", "--name", "acme"},
			map[string]string{"MEMORY_FILE_PATH": "/var/lib/cexec/tenants/acme/servers/memory/memory.jsonl", "MODE": "acme-acme"},
			nil, "/var/lib/cexec/tenants/acme/servers/memory"},
		{"memory", "default", []string{"server-memory", "--name", "default"},
			map[string]string{"MEMORY_FILE_PATH": "/var/lib/cexec/tenants/default/servers/memory/memory.jsonl", "MODE": "x"},
			nil, "/var/lib/cexec/tenants/default/servers/memory"},
		{"github", "acme", nil, nil, map[string]string{"Authorization": "Bearer acme-secret", "X-Tenant": "acme"}, ""},
		{"github", "beta", nil, nil, map[string]string{"Authorization": "Bearer shared-secret", "X-Tenant": "beta"}, ""},
		{"plain", "acme", nil, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.server+"/"+tt.tenant, func(t *testing.T) {
			s, err := cfg.ServerForTenant(tt.server, tt.tenant)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.args) > 0 && !slices.Equal(s.Args, tt.args) {
				t.Errorf("args = %q, want %q", s.Args, tt.args)
			}
			if len(tt.env) > 0 && !maps.Equal(s.Env, tt.env) {
				t.Errorf("env = %v, want %v", s.Env, tt.env)
			}
			if !maps.Equal(s.Headers, tt.headers) && len(tt.headers) > 0 {
				t.Errorf("headers = %v, want %v", s.Headers, tt.headers)
			}
			if s.Cwd != tt.cwd {
				t.Errorf("cwd = %q, want %q", s.Cwd, tt.cwd)
			}
		})
	}
	// The configured values themselves stay per-tenant templates.
	if got := cfg.MCPServer("memory").Env["MEMORY_FILE_PATH"]; got != "/var/lib/cexec/tenants/<tenant>/servers/memory/memory.jsonl" {
		t.Errorf("loaded env = %q, want the <tenant> placeholder", got)
	}
	if m := cfg.MCPServer("memory"); m.IdleTimeout.String() != "30s" || m.MaxInstances != 3 {
		t.Errorf("idle_timeout %s, max_instances %d", m.IdleTimeout, m.MaxInstances)
	}
	if _, err := cfg.ServerForTenant("memory", "../etc"); err == nil {
		t.Error("an invalid tenant id was accepted")
	}

	out, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"shared-secret", "acme-secret"} {
		if bytes.Contains(out, []byte(secret)) {
			t.Errorf("MaskedJSON shows %s:\n%s", secret, out)
		}
	}
	for _, want := range []string{`"scope": "tenant"`, `"max_instances": 3`, `"MODE": "acme-acme"`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("MaskedJSON lacks %s:\n%s", want, out)
		}
	}
}
