package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// TestReplicasShareApprovals: two replicas on one real PostgreSQL. A call
// that waits for an operator in replica a (its client cannot answer
// elicitations) is listed by `cexecctl approvals` on replica b, and
// approved or denied there; replica a's program gets the decision.
func TestReplicasShareApprovals(t *testing.T) {
	pg := pgtest.Start(t)
	extra := fmt.Sprintf(`
mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = "${tenant.dir}/memory.jsonl" }
  scope   = "tenant"
}

tenant "ops" {
  policy {
    approval {
      tools   = ["memory/delete_*"]
      timeout = "25s"
    }
  }
}
`, testpeers.Bin(t, "mcp-server-memory"))
	rs := startReplicas(t, pg, 2, extra)
	for _, r := range rs {
		requireSandbox(t, r.s)
	}
	a, b := rs[0], rs[1]
	c := mcpSession(t, a.s, "ops")

	// Listed, and decided, by the replica the calls do not wait in.
	for _, id := range operatorDecides(t, c, b.s) {
		if _, errOut, code := ctl(t, a.s, "approvals", "approve", id); code == 0 || !strings.Contains(errOut, "no such pending approval") {
			t.Errorf("deciding %s again on replica a: exit %d, %s", id, code, errOut)
		}
	}
	log := sessionLogs(t, a.s, "ops")
	for _, want := range []string{`"approval":"approved by an operator"`, `"approval":"denied by an operator"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the session log does not record %s", want)
		}
	}
}
