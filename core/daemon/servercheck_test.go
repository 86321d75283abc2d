package daemon

import (
	"testing"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/doctor"
)

// TestServerCheck: doctor fails a required server only once its connection
// failed, never names an empty reason, and does not send the operator to
// servers ls for the error it already shows.
func TestServerCheck(t *testing.T) {
	tests := []struct {
		name                string
		u                   catalog.ServerStatus
		status, detail, fix string
	}{
		{"ready", catalog.ServerStatus{Name: "m", State: catalog.StateReady}, doctor.OK, "ready", ""},
		{"first connection", catalog.ServerStatus{Name: "m", State: catalog.StateConnecting}, doctor.Warn, "connecting", "calls wait while it connects; run doctor again in a moment, and if it does not connect check the command or url"},
		{"reconnecting after a loss", catalog.ServerStatus{Name: "m", State: catalog.StateReconnecting, LastError: "process exited"}, doctor.Warn, "reconnecting: process exited", "calls wait while it connects; run doctor again in a moment, and if it does not connect check the command or url"},
		{"failed", catalog.ServerStatus{Name: "m", State: catalog.StateBackoff, LastError: "exec: not found"}, doctor.Fail, "backoff: exec: not found", "check the command or url, and the server's own log lines in cexecd's log"},
		{"failed, optional", catalog.ServerStatus{Name: "m", State: catalog.StateBackoff, LastError: "refused", Optional: true}, doctor.Warn, "backoff: refused", "check the command or url, and the server's own log lines in cexecd's log"},
	}
	for _, tt := range tests {
		c := serverCheck(tt.u)
		if c.Status != tt.status || c.Detail != tt.detail || c.Fix != tt.fix {
			t.Errorf("%s: %+v, want %s %q %q", tt.name, c, tt.status, tt.detail, tt.fix)
		}
	}
}
