package sessions

import (
	"strings"
	"testing"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// TestWriteEntry checks what `sessions show` prints of an execution's
// tool calls, of what upstream servers logged during them, and of its
// persistent interpreter and cexec's warning.
func TestWriteEntry(t *testing.T) {
	e := &cexecv1.SessionEntry{Seq: 1, Kind: "execution", Code: "x()", Interpreter: "sbx-acme-1",
		Warnings: []string{"this session's persistent interpreter had ended (its sandbox was idle)"},
		ToolCalls: []*cexecv1.SessionToolCall{{Server: "crm", Tool: "delete", Ok: true, DurationMs: 2, Approval: "approved by an operator"},
			{Server: "crm", Tool: "get", Ok: true, DurationMs: 1}},
		UpstreamLog: []*cexecv1.SessionUpstreamLog{{Server: "crm", Level: "info", Logger: "db", DataJson: []byte(`"deleted 1 row"`)},
			{Server: "crm", Level: "debug", Truncated: true}, {Server: "crm", Level: "error", Withheld: true}},
	}
	var b strings.Builder
	writeEntry(&b, e)
	for _, want := range []string{
		"  tool:   crm.delete ok 2.0 ms (approved by an operator)\n",
		"  tool:   crm.get ok 1.0 ms\n",
		"  log:    crm info (db): \"deleted 1 row\"\n",
		"  log:    crm debug: dropped, over 4 KiB\n",
		"  log:    crm error: withheld, it could not be checked for sensitive data\n",
		"  code:   x()\n  persistent, in sandbox sbx-acme-1\n  warning: this session's persistent interpreter had ended (its sandbox was idle)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("sessions show does not print %q:\n%s", want, b.String())
		}
	}
}
