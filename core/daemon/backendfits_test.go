package daemon

import (
	"strings"
	"testing"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestBackendFits: a backend that lacks what the config asks of every
// sandbox is refused at start, with the setting that asks for it named.
func TestBackendFits(t *testing.T) {
	tests := []struct {
		name       string
		network    bool
		tenantUIDs bool
		caps       sandbox.Capabilities
		wantErr    string
		session    bool // sandbox.session_interpreter
	}{
		{"nothing asked", false, false, sandbox.Capabilities{}, "", false},
		{"network allowed", true, false, sandbox.Capabilities{Network: true}, "", false},
		{"network refused", true, false, sandbox.Capabilities{RunAs: true}, "sandbox.network = true", false},
		{"run as allowed", false, true, sandbox.Capabilities{RunAs: true}, "", false},
		{"run as missing", false, true, sandbox.Capabilities{Network: true}, "tenant_uids", false},
		{"both", true, true, sandbox.Capabilities{Network: true, RunAs: true}, "", false},
		{"unavailable for now", true, false, sandbox.Capabilities{UnavailableReason: "the cluster is out of reach"}, "", false},
		{"session interpreter", false, false, sandbox.Capabilities{SessionInterpreter: true}, "", true},
		{"session interpreter missing", false, false, sandbox.Capabilities{PersistentInterpreter: true}, "sandbox.session_interpreter = true", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := backendFits(config.Sandbox{Backend: "bwrap", Network: tt.network, SessionInterpreter: tt.session}, tt.caps, tt.tenantUIDs)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error naming %q", err, tt.wantErr)
			}
		})
	}
}
