package servers

import (
	"bytes"
	"strings"
	"testing"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// TestTableShowsStrayStdout: a server that wrote lines on stdout that are
// not JSON-RPC is named under the table with the count and the last line,
// so the operator learns of it without reading cexecd's log.
func TestTableShowsStrayStdout(t *testing.T) {
	var out bytes.Buffer
	ss := []*cexecv1.ServerInfo{
		{Name: "chatty", Transport: "stdio", State: "ok", Tools: 2, Pid: 42, StrayStdoutLines: 3, LastStrayStdoutLine: "DEBUG handling echo"},
		{Name: "quiet", Transport: "stdio", State: "ok", Tools: 1, Pid: 43},
		{Name: "scoped", Transport: "stdio", State: "ok", Scope: "tenant", StrayStdoutLines: 1, LastStrayStdoutLine: "banner",
			Instances: []*cexecv1.ServerInstance{{Tenant: "acme", State: "ok", Pid: 44, StrayStdoutLines: 1, LastStrayStdoutLine: "banner"}}},
	}
	if err := table(&cli.Env{Stdout: &out}, ss); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"chatty: wrote 3 lines that are not JSON-RPC on stdout, which cexecd skips (a stdio server must log to stderr); the last: DEBUG handling echo\n",
		"scoped: wrote 1 line that is not JSON-RPC on stdout",
		"scoped (tenant acme): wrote 1 line that is not JSON-RPC on stdout",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet:") {
		t.Errorf("a server that wrote nothing stray is named:\n%s", got)
	}
}
