package catalog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/config"
)

// chattyServer is a stdio MCP server that, besides answering properly,
// prints what a careless server prints on stdout: a banner at start (with
// -banner), a debug line instead of the answer to the tool "debug", an
// answer with NaN in it (Python's json.dumps default) to "nan", and a
// JSON log record before the answer to "logged".
const chattyServer = `
import json, os, sys
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
def say(s):
    sys.stdout.write(s + "\n"); sys.stdout.flush()
if "-banner" in sys.argv:
    say("Chatty MCP server 1.0 ready")
tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "debug", "nan", "logged")]
for line in sys.stdin:
    m = json.loads(line)
    mid, meth = m.get("id"), m.get("method")
    if mid is None:
        continue
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "chatty", "version": "1"}}})
    elif meth == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
    elif meth == "tools/call":
        name = m["params"]["name"]
        ok = {"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "ok " + name}]}}
        if name == "debug":
            say("DEBUG handling %s with token %s %s" % (name, os.environ.get("TOKEN", ""), "x" * 400))
        elif name == "nan":
            say('{"jsonrpc": "2.0", "id": %s, "result": {"content": [], "structuredContent": {"v": NaN}}}' % json.dumps(mid))
        elif name == "logged":
            say('{"level": "info", "msg": "calling logged"}')
            send(ok)
        else:
            send(ok)
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})
`

func chatty(t *testing.T, args ...string) *config.MCPServer {
	t.Helper()
	script := filepath.Join(t.TempDir(), "chatty.py")
	if err := os.WriteFile(script, []byte(chattyServer), 0o644); err != nil {
		t.Fatal(err)
	}
	return &config.MCPServer{Name: "chatty", Transport: config.TransportStdio, Command: "/usr/bin/python3",
		Args: append([]string{script}, args...), Env: map[string]string{"TOKEN": "tok-5e1f0c2b7a9d"}, Timeout: 500 * time.Millisecond}
}

// logBuffer is an hclog output tests can read while the catalog writes.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStrayStdoutSaysWhy: a stdio server that prints something that is
// not a JSON-RPC message on stdout, where the client can only skip it,
// leaves a call without an answer. The timeout then says what the server
// printed meanwhile, the log warns quoting the line (cut, secrets masked),
// and the server's status counts such lines. Valid traffic around them is
// untouched.
func TestStrayStdoutSaysWhy(t *testing.T) {
	const secret = "tok-5e1f0c2b7a9d"
	var logs logBuffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "catalog", Level: hclog.Debug, Output: &logs})
	cfg := &config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}, MCPServers: []*config.MCPServer{chatty(t, "-banner")}}
	c, err := New(cfg, Options{ServersDir: filepath.Join(t.TempDir(), "servers"), Logger: logger, MinBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// As if the config had given the server the token through env().
	c.mask.Store(newSecretMask([]string{secret}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// The banner neither fails the connection nor a call.
	res, err := c.Call(ctx, "default", "chatty", "echo", nil)
	if err != nil || res.Content[0].(mcp.TextContent).Text != "ok echo" {
		t.Fatalf("echo after the banner: %v, %v", res, err)
	}
	st, _ := c.Server("chatty")
	if st.State != StateReady || st.StrayLines != 1 || st.LastStrayLine != "Chatty MCP server 1.0 ready" {
		t.Errorf("after the banner: %+v, want 1 stray line quoting it", st)
	}
	// A JSON log record is not JSON-RPC either; the answer after it arrives.
	if _, err := c.Call(ctx, "default", "chatty", "logged", nil); err != nil {
		t.Fatalf("logged: %v", err)
	}
	if st, _ := c.Server("chatty"); st.StrayLines != 2 || !strings.Contains(st.LastStrayLine, `"msg": "calling logged"`) {
		t.Errorf("after a JSON log record: %d, %q", st.StrayLines, st.LastStrayLine)
	}

	for _, tc := range []struct{ tool, want string }{
		{"debug", "DEBUG handling debug with token (sensitive) xxx"},
		{"nan", `"structuredContent": {"v": NaN}`},
	} {
		_, err := c.Call(ctx, "default", "chatty", tc.tool, nil)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("%s: %v, want ErrTimeout", tc.tool, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "meanwhile the server wrote 1 line on stdout that is not JSON-RPC") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: error %q does not say what the server printed", tc.tool, msg)
		}
		if strings.Contains(msg, secret) || len(msg) > 600 {
			t.Errorf("%s: error %q leaks the secret or quotes the whole line", tc.tool, msg)
		}
	}
	st, _ = c.Server("chatty")
	if st.StrayLines != 4 || !strings.Contains(st.LastStrayLine, "NaN") || st.State != StateReady || st.Restarts != 0 {
		t.Errorf("after the calls: %+v", st)
	}

	// A call that times out with nothing stray printed meanwhile says nothing of it.
	if _, err := c.Call(ctx, "default", "chatty", "echo", nil); err != nil {
		t.Fatalf("echo at the end: %v", err)
	}

	out := logs.String()
	if strings.Contains(out, secret) {
		t.Errorf("the log has the secret:\n%s", out)
	}
	for _, want := range []string{"Chatty MCP server 1.0 ready", "DEBUG handling debug with token (sensitive) xxx", "NaN"} {
		if !strings.Contains(out, "catalog.chatty: server wrote a line on stdout that is not JSON-RPC") || !strings.Contains(out, want) {
			t.Errorf("the log does not warn of %q naming the server:\n%s", want, out)
		}
	}
}

// TestStrayLogRateLimited: a server printing on stdout in a loop gets a
// burst of warnings and then one per interval in the log, each counting the
// lines that were not logged since the one before.
func TestStrayLogRateLimited(t *testing.T) {
	var logs logBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &strays{now: func() time.Time { return now }}
	for i := 0; i < 100; i++ {
		s.add(log, "loop line")
	}
	if n := strings.Count(logs.String(), "not JSON-RPC"); n != strayLogBurst {
		t.Fatalf("%d warnings for 100 lines in an instant, want %d:\n%s", n, strayLogBurst, logs.String())
	}
	now = now.Add(strayLogEvery)
	s.add(log, "later line")
	out := logs.String()
	if n := strings.Count(out, "not JSON-RPC"); n != strayLogBurst+1 || !strings.Contains(out, "unlogged=90") {
		t.Fatalf("after the interval: %d warnings, want %d, the last counting the 90 unlogged lines:\n%s", n, strayLogBurst+1, out)
	}
	if s.count() != 101 {
		t.Errorf("count %d", s.count())
	}
}

// TestStrayLineCut: a long line is quoted cut to strayQuote bytes, on a
// rune boundary.
func TestStrayLineCut(t *testing.T) {
	long := strings.Repeat("é", strayQuote)
	got := cutLine(long)
	if len(got) > strayQuote+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("cut %q", got)
	}
	if got := cutLine("short"); got != "short" {
		t.Errorf("short line cut to %q", got)
	}
}

// BenchmarkStdoutWatch measures what reading a server's answers through a
// stdoutWatch adds to reading them as mcp-go does (bufio ReadString), for
// a small answer and a 1 MiB one.
func BenchmarkStdoutWatch(b *testing.B) {
	for _, size := range []int{300, 1 << 20} {
		text := strings.Repeat("a", size)
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}})
		line = append(line, '\n')
		stream := bytes.Repeat(line, 64)
		for _, watched := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dB/watched=%v", len(line), watched), func(b *testing.B) {
				b.SetBytes(int64(len(stream)))
				// As for a connection, the readers are made once.
				src, br := bufio.NewReaderSize(nil, 64<<10), bufio.NewReader(nil)
				for b.Loop() {
					var r io.Reader = bytes.NewReader(stream)
					if watched {
						src.Reset(r)
						r = &stdoutWatch{src: src, onStray: func([]byte) { b.Fatal("stray") }}
					}
					br.Reset(r)
					for {
						if _, err := br.ReadString('\n'); err != nil {
							break
						}
					}
				}
			})
		}
	}
}

// TestStdoutWatch: the watch hands on every byte unchanged and names the
// lines that are not JSON-RPC messages, short or longer than its buffer
// (checked in pieces, the jsonrpc key possibly split between two).
func TestStdoutWatch(t *testing.T) {
	msg := func(pad int) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("a", pad) + `"}}`
	}
	for _, tc := range []struct {
		name, in string
		strays   []string
	}{
		{"messages", msg(10) + "\n" + msg(20) + "\r\n", nil},
		{"blank lines", "\n  \n" + msg(1) + "\n", nil},
		{"banner", "Server ready\n" + msg(1) + "\n", []string{"Server ready\n"}},
		{"log record", `{"level":"info","msg":"hi"}` + "\n", []string{`{"level":"info","msg":"hi"}` + "\n"}},
		{"python repr", `{'jsonrpc': '2.0', 'id': 1}` + "\n", []string{`{'jsonrpc': '2.0', 'id': 1}` + "\n"}},
		{"NaN", `{"jsonrpc":"2.0","id":1,"result":{"v":NaN}}` + "\n", []string{`{"jsonrpc":"2.0","id":1,"result":{"v":NaN}}` + "\n"}},
		{"cut off", msg(5)[:20] + "\n", []string{msg(5)[:20] + "\n"}},
		{"no newline at the end", "bye", []string{"bye"}},
		{"long message", msg(200<<10) + "\n" + msg(1) + "\n", nil},
		{"long banner", strings.Repeat("b", 200<<10) + "\n" + msg(1) + "\n", []string{strings.Repeat("b", headMax)}},
		{"long without key", `{"x":"` + strings.Repeat("c", 200<<10) + `"}` + "\n", []string{(`{"x":"` + strings.Repeat("c", headMax))[:headMax]}},
		{"long cut off", msg(200 << 10)[:150<<10] + "\n", []string{msg(200 << 10)[:headMax]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The key of a long line falls on a piece's seam here.
			for _, size := range []int{16, 4096} {
				var got []string
				w := &stdoutWatch{src: bufio.NewReaderSize(strings.NewReader(tc.in), size), onStray: func(l []byte) { got = append(got, string(l)) }}
				out, err := io.ReadAll(bufio.NewReader(w))
				if err != nil || string(out) != tc.in {
					t.Fatalf("buffer %d: passed on %d bytes (%v), want the %d read", size, len(out), err, len(tc.in))
				}
				if size == 16 && len(tc.in) < 1000 {
					continue // every line is long with so small a buffer; only the full check is compared
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.strays) {
					t.Errorf("buffer %d: strays %.80q, want %.80q", size, got, tc.strays)
				}
			}
		})
	}
}

// TestStdoutWatchKeyOnSeam: a long line whose jsonrpc key is split between
// two pieces is a message.
func TestStdoutWatchKeyOnSeam(t *testing.T) {
	for _, in := range []string{`{"id":12345678,"jsonrpc":"2.0","result":{}}` + "\n", `{"id":123456789012,"jsonrpc":"2.0","result":{}}` + "\n"} {
		var got []string
		w := &stdoutWatch{src: bufio.NewReaderSize(strings.NewReader(in), 16), onStray: func(l []byte) { got = append(got, string(l)) }}
		if out, err := io.ReadAll(w); err != nil || string(out) != in {
			t.Fatalf("passed on %q, %v", out, err)
		}
		if got != nil {
			t.Errorf("%q: strays %q", in, got)
		}
	}
}

// TestStrayQuotedOnlyToItsTenant: a shared server serves every tenant, and
// a stray line cannot be told apart by request, so a timeout quotes it only
// to a tenant that alone had calls on the server when it was written (or
// lately: a call that timed out may print after): else one tenant's error
// would show what another's call made the server print (its arguments, its
// data). The count is still given.
func TestStrayQuotedOnlyToItsTenant(t *testing.T) {
	const grace = 4 * time.Second
	log := hclog.NewNullLogger()
	for _, tc := range []struct {
		name  string
		other func(s *strays, now *time.Time) // what tenant b does around a's call
		quote bool
	}{
		{"alone", func(*strays, *time.Time) {}, true},
		{"b in flight", func(s *strays, _ *time.Time) { s.begin("b", grace) }, false},
		{"b ended just before", func(s *strays, now *time.Time) {
			s.begin("b", grace).end()
			*now = now.Add(grace / 2)
		}, false},
		{"b ended long before", func(s *strays, now *time.Time) {
			s.begin("b", grace).end()
			*now = now.Add(2 * grace)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s := &strays{now: func() time.Time { return now }}
			tc.other(s, &now)
			a := s.begin("a", grace)
			s.add(log, "DEBUG: a line only some tenant may read")
			got := a.since()
			a.end()
			if !strings.Contains(got, "1 line on stdout that is not JSON-RPC") {
				t.Errorf("since %q does not count the line", got)
			}
			if quoted := strings.Contains(got, "a line only some tenant may read"); quoted != tc.quote {
				t.Errorf("since %q: quoted %v, want %v", got, quoted, tc.quote)
			}
		})
	}
}
