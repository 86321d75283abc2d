package workflow

import (
	"bytes"
	"strings"
	"testing"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// TestPrintWaiting prints each kind of wait: named events, any event (a
// listen without a type), and none listed (a journal written before any
// event was recorded as "").
func TestPrintWaiting(t *testing.T) {
	tests := []struct {
		events []string
		want   string
	}{
		{[]string{"approval", "veto"}, "waiting:  ask for approval or veto (cexecctl workflow signal R approval --data JSON)\n"},
		{[]string{""}, "waiting:  ask for any event (cexecctl workflow signal R EVENT --data JSON)\n"},
		{nil, "waiting:  ask for any event (cexecctl workflow signal R EVENT --data JSON)\n"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		r := &cexecv1.WorkflowRun{Run: "R", State: "waiting", Waiting: []*cexecv1.WorkflowPending{{Task: "ask", Events: tt.events}}}
		if err := printRun(&cli.Env{Stdout: &out}, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("events %q printed\n%s\nwant the line %q", tt.events, out.String(), tt.want)
		}
	}
}
