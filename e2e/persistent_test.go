package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestPersistentSessions: two sessions of one tenant, each with a
// persistent interpreter, take turns and each keeps its globals, a one-off
// execution of a third session included, as long as the pool has a sandbox
// for each. When it has not (max_total 2), the third session's execution
// ends the interpreter of the session least recently used, and that
// session's next execution says so instead of failing on a missing global
// without explanation.
func TestPersistentSessions(t *testing.T) {
	s := newSetup(t)
	f, err := os.OpenFile(s.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\nsandbox {\n  pool {\n    warm      = 0\n    max_total = 2\n  }\n}\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	startDaemon(t, s)
	sandboxOrSkip(t, s)

	count := func(session, want string, warned bool) {
		t.Helper()
		r, _ := sbxJSON(t, s, "--session", session, "--persistent", "-c", "n = globals().get('n', 0) + 1\nprint(n)")
		if r.ExitCode != 0 || r.Stdout != want {
			t.Fatalf("session %s counted %q (%+v), want %q", session, r.Stdout, r, want)
		}
		lost := len(r.Warnings) == 1 && strings.Contains(r.Warnings[0], "persistent interpreter had ended (another session's execution needed its sandbox")
		if lost != warned || (!warned && len(r.Warnings) > 0) {
			t.Errorf("session %s: warnings %q, want the lost interpreter's: %v", session, r.Warnings, warned)
		}
	}
	count("a", "1\n", false)
	count("b", "1\n", false)
	count("a", "2\n", false)
	count("b", "2\n", false)
	// Both sandboxes hold an interpreter and the pool has room for no
	// third: the one-off takes the least recently used, a's.
	if r, _ := sbxJSON(t, s, "--session", "c", "-c", "print('c')"); r.ExitCode != 0 || r.Stdout != "c\n" {
		t.Fatalf("session c: %+v", r)
	}
	count("a", "1\n", true)
	count("b", "3\n", false)
	count("a", "2\n", false)
}
