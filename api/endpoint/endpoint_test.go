package endpoint

import (
	"path/filepath"
	"testing"
)

func TestAddress(t *testing.T) {
	tests := []struct{ name, address, socket, want string }{
		{"neither", "", "", DefaultSocket()},
		{"the daemon's variable", "", "/d/cexecd.sock", "/d/cexecd.sock"},
		{"the older name wins", "unix:/a/cexecd.sock", "/d/cexecd.sock", "unix:/a/cexecd.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(AddressEnv, tt.address)
			t.Setenv(SocketEnv, tt.socket)
			if got := Address(); got != tt.want {
				t.Errorf("Address() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultSocketFrom(t *testing.T) {
	env := map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if got := DefaultSocketFrom(lookup); got != "/run/user/1/cexec/cexecd.sock" {
		t.Errorf("DefaultSocketFrom = %q", got)
	}
	delete(env, "XDG_RUNTIME_DIR")
	if got := DefaultSocketFrom(lookup); filepath.Base(got) != "cexecd.sock" || filepath.Dir(got) == "/run/user/1/cexec" {
		t.Errorf("DefaultSocketFrom without XDG_RUNTIME_DIR = %q", got)
	}
}

func TestTenant(t *testing.T) {
	t.Setenv(TenantEnv, "")
	if got := Tenant(); got != DefaultTenant {
		t.Errorf("Tenant() = %q, want %q", got, DefaultTenant)
	}
	t.Setenv(TenantEnv, "acme")
	if got := Tenant(); got != "acme" {
		t.Errorf("Tenant() with %s=acme = %q", TenantEnv, got)
	}
}

func TestMCPSocket(t *testing.T) {
	if got := MCPSocket("/run/user/1000/cexec/cexecd.sock"); got != "/run/user/1000/cexec/cexecd-mcp.sock" {
		t.Errorf("MCPSocket = %q", got)
	}
}
