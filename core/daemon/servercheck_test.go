package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/doctor"
)

// TestServerCheck: doctor fails a required server only once its connection
// failed, never names an empty reason, and does not send the operator to
// servers ls for the error it already shows; a server writing on stdout
// what is not JSON-RPC is warned of with the line.
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
		{"ready, printing on stdout", catalog.ServerStatus{Name: "m", State: catalog.StateReady, StrayLines: 2, LastStrayLine: "DEBUG x"}, doctor.Warn,
			"ready; it wrote 2 lines on stdout that are not JSON-RPC, which cexecd skips; the last: DEBUG x", strayFix},
		{"failed after a banner", catalog.ServerStatus{Name: "m", State: catalog.StateBackoff, LastError: "initialize: timed out", StrayLines: 1, LastStrayLine: "hello"}, doctor.Fail,
			"backoff: initialize: timed out; it wrote 1 line on stdout that is not JSON-RPC, which cexecd skips: hello", "check the command or url, and the server's own log lines in cexecd's log; " + strayFix},
	}
	for _, tt := range tests {
		c := serverCheck(tt.u)
		if c.Status != tt.status || c.Detail != tt.detail || c.Fix != tt.fix {
			t.Errorf("%s: %+v, want %s %q %q", tt.name, c, tt.status, tt.detail, tt.fix)
		}
	}
}

// TestFileCheck: the running daemon's doctor checks the config file as it
// is now, and says a reload would refuse a broken one.
func TestFileCheck(t *testing.T) {
	broken := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported argument", Detail: "An argument named \"bogus\" is not expected here.",
		Subject: &hcl.Range{Filename: "cexec.hcl", Start: hcl.Pos{Line: 3, Column: 3}, End: hcl.Pos{Line: 3, Column: 8}}}}
	tests := []struct {
		name   string
		diags  hcl.Diagnostics
		err    error
		status string
		detail string
	}{
		{"clean", nil, nil, doctor.OK, "no problems"},
		{"broken since start", broken, nil, doctor.Fail, "a reload would refuse the file as it is now:\ncexec.hcl:3"},
		{"unreadable", nil, errors.New("check for ./cexec.hcl: permission denied"), doctor.Fail, "check for ./cexec.hcl: permission denied"},
	}
	for _, tt := range tests {
		s := &operations{load: func() (*config.Config, hcl.Diagnostics, error) { return nil, tt.diags, tt.err }}
		c := s.fileCheck()
		if c.Name != "config" || c.Status != tt.status || !strings.HasPrefix(c.Detail, tt.detail) {
			t.Errorf("%s: %+v, want %s starting %q", tt.name, c, tt.status, tt.detail)
		}
	}
}
