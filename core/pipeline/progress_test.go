package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestProgressWording(t *testing.T) {
	lines := func(n float64, msg string) progressEvent { return progressEvent{done: n, message: msg} }
	own := func(n, total float64, msg string) progressEvent {
		return progressEvent{explicit: true, done: n, total: total, message: msg}
	}
	up := func(msg string) progressEvent { return progressEvent{upstream: true, done: 3, total: 4, message: msg} }
	tests := []struct {
		name    string
		oneCall bool
		events  []progressEvent
		want    []Progress
	}{
		{"lines count as they are", false,
			[]progressEvent{lines(1, "a"), lines(5, "b")},
			[]Progress{{Progress: 1, Message: "a"}, {Progress: 5, Message: "b"}}},
		{"the program's numbers go as they are", false,
			[]progressEvent{own(0, 10, "start"), own(4, 10, "")},
			[]Progress{{Progress: 0, Total: 10, Message: "start"}, {Progress: 4, Total: 10}}},
		{"the program's numbers after more lines advance by one", false,
			[]progressEvent{lines(3, "x"), own(1, 3, "chunk"), own(2, 3, ""), own(7, 3, "past")},
			[]Progress{{Progress: 3, Message: "x"}, {Progress: 4, Message: "1/3: chunk"}, {Progress: 5, Message: "2/3"}, {Progress: 7, Total: 3, Message: "past"}}},
		{"a value going back advances by one", false,
			[]progressEvent{own(5, 0, "a"), own(2, 0, "b")},
			[]Progress{{Progress: 5, Message: "a"}, {Progress: 6, Message: "2: b"}}},
		{"an upstream's numbers stay in the message", false,
			[]progressEvent{up("s/t 3/4"), up("s/t 3/4")},
			[]Progress{{Progress: 0, Message: "s/t 3/4"}, {Progress: 1, Message: "s/t 3/4"}}},
		{"a single call's upstream numbers go as they are while they increase", true,
			[]progressEvent{{upstream: true, done: 1, total: 5, message: "s/t 1/5"}, {upstream: true, done: 5, total: 5, message: "s/t 5/5"}, up("s/t 3/4")},
			[]Progress{{Progress: 1, Total: 5, Message: "s/t 1/5"}, {Progress: 5, Total: 5, Message: "s/t 5/5"}, {Progress: 6, Message: "s/t 3/4"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Progress
			p := &progressReporter{sent: -1, oneCall: tc.oneCall, send: func(r Progress) { got = append(got, r) }}
			for _, ev := range tc.events {
				p.report(context.Background(), ev)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("reports %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("report %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestProgressTokenizes(t *testing.T) {
	var got []Progress
	p := &progressReporter{sent: -1, log: hclog.NewNullLogger(), send: func(r Progress) { got = append(got, r) }}
	p.tokenize = func(_ context.Context, s string) (string, error) {
		return strings.ReplaceAll(s, "bob@example.org", "[EMAIL_1]"), nil
	}
	p.report(context.Background(), progressEvent{done: 1, message: "mail bob@example.org"})
	// A message the tokenizer fails on goes without its message: the guard
	// fails closed.
	p.tokenize = func(context.Context, string) (string, error) { return "", errors.New("guard down") }
	p.report(context.Background(), progressEvent{done: 2, message: "mail bob@example.org"})
	want := []Progress{{Progress: 1, Message: "mail [EMAIL_1]"}, {Progress: 2}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("reports %+v, want %+v", got, want)
	}
}

func TestProgressOutput(t *testing.T) {
	p := &progressReporter{sent: -1, wake: make(chan struct{}, 1)}
	steps := []struct {
		stream sandbox.Stream
		data   string
		want   string // the pending event's message; "" for none
	}{
		{sandbox.Stdout, "par", ""},
		{sandbox.Stdout, "tial\nnext", "1 line printed; last: partial"},
		{sandbox.Stderr, "warn\n", "2 lines printed"},
		{sandbox.Stdout, " one\ntwo\nthree", "4 lines printed; last: two"},
	}
	for i, s := range steps {
		p.pending = nil
		p.output(s.stream, []byte(s.data))
		got := ""
		if p.pending != nil {
			got = p.pending.message
		}
		if got != s.want {
			t.Errorf("step %d: pending %q, want %q", i, got, s.want)
		}
	}
	// Once the program reports its own progress, lines are not reported.
	if _, err := p.call(json.RawMessage(`{"progress":1,"total":2,"message":"half"}`)); err != nil {
		t.Fatal(err)
	}
	p.output(sandbox.Stdout, []byte("more\n"))
	if p.pending == nil || !p.pending.explicit || p.pending.message != "half" {
		t.Errorf("pending after cexec.progress and a line: %+v", p.pending)
	}
}

func TestProgressCallErrors(t *testing.T) {
	tests := []struct{ params, wantType string }{
		{`{"progress":null}`, "ValueError"},
		{`{"progress":-1}`, "ValueError"},
		{`{"progress":1,"total":0}`, "ValueError"},
		{`{"progress":"1"}`, "TypeError"},
		{`{"progress":1,"message":3}`, "TypeError"},
	}
	for _, tc := range tests {
		p := &progressReporter{sent: -1, wake: make(chan struct{}, 1)}
		_, err := p.call(json.RawMessage(tc.params))
		var ce *sandbox.CallError
		if !errors.As(err, &ce) || ce.Type != tc.wantType || !strings.HasPrefix(ce.Message, "cexec.progress: ") {
			t.Errorf("call(%s) = %v, want a %s", tc.params, err, tc.wantType)
		}
	}
}

func TestCutMessage(t *testing.T) {
	long := strings.Repeat("é", maxProgressMessage+5)
	tests := []struct{ in, want string }{
		{"  padded  ", "padded"},
		{"first\nsecond", "first"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{long, strings.Repeat("é", maxProgressMessage-1) + "…"},
	}
	for _, tc := range tests {
		if got := cutMessage(tc.in); got != tc.want {
			t.Errorf("cutMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestProgressThrottle posts many events at once: fewer reports go out,
// the first at once, and none after stop.
func TestProgressThrottle(t *testing.T) {
	var mu sync.Mutex
	var got []Progress
	stopped := false
	first := make(chan struct{})
	p := newProgressReporter(func(r Progress) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			t.Errorf("report %+v after stop", r)
		}
		if len(got) == 0 {
			close(first)
		}
		got = append(got, r)
	}, nil, hclog.NewNullLogger(), false)
	const events = 1000
	for i := 1; i <= events; i++ {
		p.output(sandbox.Stdout, []byte("line\n"))
	}
	<-first
	p.stop()
	mu.Lock()
	stopped = true
	n := len(got)
	mu.Unlock()
	if n == 0 || n >= events {
		t.Errorf("%d reports for %d lines", n, events)
	}
	for i := 1; i < n; i++ {
		if got[i].Progress <= got[i-1].Progress {
			t.Errorf("report %d does not increase: %+v", i, got)
		}
	}
}

// heldRunner prints a line, reports progress, then runs until its context
// ends, as a sandbox whose program the client cancels.
type heldRunner struct {
	mu        sync.Mutex
	ran       string
	destroyed []string
}

func (r *heldRunner) Exec(ctx context.Context, req sandbox.ExecRequest, h sandbox.Host) (sandbox.ExecResult, error) {
	r.mu.Lock()
	r.ran = req.SandboxID
	r.mu.Unlock()
	_ = h.Output(sandbox.Stdout, []byte("started\n"))
	if _, err := h.Call(ctx, MethodProgress, json.RawMessage(`{"progress":1,"total":4,"message":"one"}`)); err != nil {
		return sandbox.ExecResult{}, err
	}
	<-ctx.Done()
	return sandbox.ExecResult{}, ctx.Err()
}

func (r *heldRunner) Create(context.Context, sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (r *heldRunner) Destroy(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.destroyed = append(r.destroyed, id)
	return nil
}

func (r *heldRunner) Health(context.Context, string) error { return nil }

// TestExecuteCodeCancelled: the client cancels once progress arrives; the
// execution ends with the context's error, the session log records the
// cancellation, and the pool destroys the sandbox rather than reuse it.
func TestExecuteCodeCancelled(t *testing.T) {
	ws, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	r := &heldRunner{}
	p, err := pool.New(r, pool.Config{MaxTotal: 2, Template: func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	x := &Executor{Pool: p, Sandbox: r, Workspaces: ws, Log: hclog.NewNullLogger()}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var reports []Progress
	_, err = x.ExecuteCode(ctx, CodeRequest{Tenant: "acme", Session: "s1", Code: "long()", Progress: func(r Progress) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, r)
		cancel()
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ExecuteCode = %v, want context.Canceled", err)
	}
	mu.Lock()
	if len(reports) == 0 {
		t.Error("no progress before the cancellation")
	}
	mu.Unlock()
	tn, err := ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	log, err := tn.ReadSession("s1")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(log.Entries); n != 1 || log.Entries[0].Result == nil || log.Entries[0].Result.ErrorType != TypeCancelled {
		t.Errorf("session log %+v, want one cancelled execution", log.Entries)
	}
	// Not back among the idle ones, and destroyed.
	for _, sb := range p.Stats().Sandboxes {
		if sb.ID == r.ran {
			t.Errorf("the cancelled sandbox is still in the pool: %+v", sb)
		}
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.destroyed, r.ran) {
		t.Errorf("destroyed sandboxes %v, want the cancelled %s", r.destroyed, r.ran)
	}
}

// BenchmarkProgressOutput is what progress adds to each chunk a program
// prints when the agent asked for progress.
func BenchmarkProgressOutput(b *testing.B) {
	p := newProgressReporter(func(Progress) {}, nil, hclog.NewNullLogger(), false)
	defer p.stop()
	chunk := []byte("a line a long-running program prints, sixty-four bytes or so..\n")
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		p.output(sandbox.Stdout, chunk)
	}
}

// TestProgressAcrossAttempts: a repair's program counts from the start
// again; the task's reports still increase.
func TestProgressAcrossAttempts(t *testing.T) {
	var got []Progress
	send := acrossAttempts(func(r Progress) { got = append(got, r) })
	for _, r := range []Progress{
		{Progress: 1, Message: "1 line printed"}, {Progress: 2, Total: 4, Message: "two"}, // the first program
		{Progress: 1, Total: 4, Message: "one"}, {Progress: 3, Total: 4}, {Progress: 4, Total: 4, Message: "all"}, // the repair's
	} {
		send(r)
	}
	want := []Progress{{Progress: 1, Message: "1 line printed"}, {Progress: 2, Total: 4, Message: "two"},
		{Progress: 3, Message: "1/4: one"}, {Progress: 4, Message: "3/4"}, {Progress: 5, Message: "4/4: all"}}
	if len(got) != len(want) {
		t.Fatalf("reports %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("report %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if acrossAttempts(nil) != nil {
		t.Error("no sink, yet a func")
	}
}
