package e2e

import (
	"strings"
	"testing"
)

// TestSessionLogCap: a program filling its session log through checkpoint
// sees the max_session_log error from checkpoint; nothing past the cap is
// logged and sessions ls keeps working.
func TestSessionLogCap(t *testing.T) {
	s := workspaceSetup(t)
	startDaemon(t, s)
	requireSandbox(t, s)
	code := `import cexec
n = 0
try:
    while n < 100:
        cexec.checkpoint("step", {"pad": "c" * 8000})
        n += 1
    print("no cap")
except Exception as e:
    print(n, "max_session_log" in str(e), "start a new session" in str(e))
`
	out := must(t, s, "", "exec", "--tenant", "capped", "--session", "full", "-c", code)
	f := strings.Fields(out)
	if len(f) != 3 || f[0] == "0" || f[1] != "True" || f[2] != "True" {
		t.Fatalf("program output %q: want the checkpoint count and the cap's error", out)
	}
	ls := decode[sessionList](t, must(t, s, "", "sessions", "ls", "--tenant", "capped", "--json"))
	if len(ls.Sessions) != 1 {
		t.Fatalf("sessions ls = %+v", ls)
	}
	if got := ls.Sessions[0].Checkpoints; got != f[0] {
		t.Errorf("sessions ls shows %s checkpoints; the program made %s before the cap", got, f[0])
	}
}
