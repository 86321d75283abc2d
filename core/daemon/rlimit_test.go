package daemon

import (
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testutil"
)

// TestRaiseFileLimit: a lowered soft limit is raised to the hard one, and a
// connection cap that would eat the reserve is warned about.
func TestRaiseFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max <= 512 {
		t.Skipf("hard open file limit %d is too low to lower the soft one", orig.Max)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 512, Max: orig.Max}); err != nil {
		t.Fatal(err)
	}
	out := &testutil.Buffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Info})
	raiseFileLimit(log, config.MCP{Listen: config.DefaultMCPListen, MaxConnections: int(orig.Max)})
	var got syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cur != orig.Max {
		t.Errorf("soft limit %d, want the hard limit %d", got.Cur, orig.Max)
	}
	for _, want := range []string{"open file limit", "mcp.max_connections leaves too few descriptors"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
