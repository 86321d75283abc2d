package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// TestPersistentSessions: two sessions of one tenant, each with a
// persistent interpreter, take turns and each keeps its globals, a one-off
// execution of a third session included, as long as the pool has a sandbox
// for each. When it has not (max_total 2), the third session's execution
// ends the interpreter of the session least recently used, and that
// session's next execution says so instead of failing on a missing global
// without explanation. So does the next execution after cexecd restarted,
// from the session's log.
func TestPersistentSessions(t *testing.T) {
	s := newSetup(t)
	appendConfig(t, s, "\nsandbox {\n  pool {\n    warm      = 0\n    max_total = 2\n  }\n}\n")
	d := startDaemon(t, s)
	sandboxOrSkip(t, s)

	const (
		taken     = "persistent interpreter had ended (another session's execution needed its sandbox"
		ended     = "persistent interpreter had ended (it ended during one of the session's executions"
		restarted = "persistent interpreter is not in this cexecd (its last execution ran in sandbox sbx-default-"
	)
	count := func(session, want, warning string) {
		t.Helper()
		r, _ := sbxJSON(t, s, "--session", session, "--persistent", "-c", "n = globals().get('n', 0) + 1\nprint(n)")
		if r.ExitCode != 0 || r.Stdout != want {
			t.Fatalf("session %s counted %q (%+v), want %q", session, r.Stdout, r, want)
		}
		warned := len(r.Warnings) == 1 && warning != "" && strings.Contains(r.Warnings[0], warning)
		if !warned && (warning != "" || len(r.Warnings) > 0) {
			t.Errorf("session %s: warnings %q, want %q", session, r.Warnings, warning)
		}
	}
	count("a", "1\n", "")
	count("b", "1\n", "")
	count("a", "2\n", "")
	count("b", "2\n", "")
	// Both sandboxes hold an interpreter and the pool has room for no
	// third: the one-off takes the least recently used, a's.
	if r, _ := sbxJSON(t, s, "--session", "c", "-c", "print('c')"); r.ExitCode != 0 || r.Stdout != "c\n" {
		t.Fatalf("session c: %+v", r)
	}
	count("a", "1\n", taken)
	count("b", "3\n", "")
	count("a", "2\n", "")
	// A program that ends its interpreter: the session's next execution
	// is told why its globals are gone.
	if r, _ := sbxJSON(t, s, "--session", "b", "--persistent", "-c", "import os\nos._exit(0)"); r.ExitCode != 0 {
		t.Fatalf("os._exit: %+v", r)
	}
	count("b", "1\n", ended)
	count("b", "2\n", "")
	// cexecd restarts: its sandboxes went with it, and the session's log
	// says where the globals were.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	startDaemon(t, s)
	count("b", "1\n", restarted)
	count("b", "2\n", "")
	// The session's log shows where its persistent executions ran and
	// what they were warned of.
	shown := mustCtl(t, s, "sessions", "show", "b")
	for _, want := range []string{"  persistent, in sandbox sbx-default-", "  warning: this session's " + restarted, "  warning: this session's " + ended} {
		if !strings.Contains(shown, want) {
			t.Errorf("sessions show b lacks %q:\n%s", want, shown)
		}
	}
}

// TestSessionInterpreter: with sandbox.session_interpreter, a session's
// executions run in one interpreter of its own (the same process), each in
// new globals; another session gets another interpreter; and asking for a
// persistent interpreter still keeps globals.
func TestSessionInterpreter(t *testing.T) {
	s := newSetup(t)
	appendConfig(t, s, "\nsandbox {\n  session_interpreter = true\n}\n")
	startDaemon(t, s)
	sandboxOrSkip(t, s)

	run := func(session string, args ...string) string {
		t.Helper()
		r, _ := sbxJSON(t, s, append([]string{"--session", session}, args...)...)
		if r.ExitCode != 0 {
			t.Fatalf("session %s %v: %+v", session, args, r)
		}
		return r.Stdout
	}
	// A module's state stays in the interpreter (standard library modules
	// stay loaded); globals do not.
	probe := func(session string) []string {
		t.Helper()
		out := strings.Fields(run(session, "-c", "import json, os\nprint('x' in globals(), getattr(json, 'mark', '-'), os.getpid())\njson.mark = "+pyQuote(session)+"\nx = 1"))
		if len(out) != 3 {
			t.Fatalf("session %s printed %q", session, out)
		}
		return out
	}
	first, second := probe("a"), probe("a")
	if first[0] != "False" || first[1] != "-" || second[0] != "False" {
		t.Fatalf("globals or module state carried over: %v then %v", first, second)
	}
	if second[1] != "a" || first[2] != second[2] {
		t.Errorf("session a ran in %v then %v, want its one interpreter (the same process, json still marked)", first, second)
	}
	if other := probe("b"); other[1] != "-" {
		t.Errorf("session b sees json marked %q: it shares session a's interpreter", other[1])
	}
	run("c", "--persistent", "-c", "y = 41")
	if out := run("c", "--persistent", "-c", "print(y + 1)"); out != "42\n" {
		t.Errorf("persistent session printed %q, want 42", out)
	}
}

func pyQuote(s string) string { return "'" + s + "'" }

// TestPersistentOverMCP: over the MCP face, execute_code's persistent
// argument keeps a session's globals between its programs, a program
// without it runs in fresh ones, the agent is told first thing when the
// globals are gone, and a closed MCP session leaves its sandbox to the
// next session instead of holding it until idle_timeout (with room for a
// second sandbox, the pool would otherwise start one).
func TestPersistentOverMCP(t *testing.T) {
	s := newSetup(t)
	appendConfig(t, s, "\nsandbox {\n  pool {\n    warm      = 0\n    max_total = 2\n  }\n}\n")
	startDaemon(t, s)
	sandboxOrSkip(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const count = "n = globals().get('n', 0) + 1\nprint(n)"
	persistent := map[string]any{"code": count, "persistent": true}
	a := mcpSession(t, s, "default")
	for _, want := range []string{"1\n", "2\n"} {
		if got := mcpCallText(ctx, t, a, "execute_code", persistent); got != want {
			t.Fatalf("persistent count printed %q, want %q", got, want)
		}
	}
	if got := mcpCallText(ctx, t, a, "execute_code", map[string]any{"code": "print('n' in globals())"}); got != "False\n" {
		t.Errorf("a program without persistent saw the session's globals: %q", got)
	}
	if got := mcpCallText(ctx, t, a, "execute_code", persistent); got != "3\n" {
		t.Errorf("after a one-off program the count printed %q, want 3", got)
	}

	mcpCallText(ctx, t, a, "execute_code", map[string]any{"code": "import os\nos._exit(0)", "persistent": true})
	res := mcpCall(ctx, t, a, "execute_code", persistent)
	const ended = "[cexec: this session's persistent interpreter had ended (it ended during one of the session's executions"
	if text := mcpText(res); res.IsError || !strings.HasPrefix(text, ended) || !strings.HasSuffix(text, "]\n1\n") {
		t.Errorf("after the interpreter ended: %q; want it to start %q and print 1", text, ended)
	}
	var out struct{ Warnings []string }
	if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &out) != nil || len(out.Warnings) != 1 {
		t.Errorf("structured content's warnings: %+v (%v)", out, res.StructuredContent)
	}

	tp, ok := a.GetTransport().(*transport.StreamableHTTP)
	if !ok || tp.GetSessionId() == "" {
		t.Fatalf("no session id on the transport: %T", a.GetTransport())
	}
	aSession := tp.GetSessionId()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := mcpSession(t, s, "default")
	if got := mcpCallText(ctx, t, b, "execute_code", map[string]any{"code": "print('b')"}); got != "b\n" {
		t.Fatalf("the next session printed %q", got)
	}
	var st struct {
		Sandboxes []struct {
			ID string `json:"id"`
		} `json:"sandboxes"`
	}
	if err := json.Unmarshal([]byte(mustCtl(t, s, "pool", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Sandboxes) != 1 {
		t.Errorf("%d sandboxes after the closed session's sandbox was free, want 1: %+v", len(st.Sandboxes), st.Sandboxes)
	}
	// The closed session, continued from b: b's program ended its
	// interpreter, and it is told why.
	res = mcpCall(ctx, t, b, "execute_code", map[string]any{"code": count, "persistent": true, "session": aSession})
	const closed = "[cexec: this session's persistent interpreter had ended (its MCP session closed, which freed its sandbox"
	if text := mcpText(res); res.IsError || !strings.HasPrefix(text, closed) || !strings.HasSuffix(text, "]\n1\n") {
		t.Errorf("the closed session continued: %q; want it to start %q and print 1", text, closed)
	}
}
