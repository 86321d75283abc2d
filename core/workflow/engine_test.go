package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/core/workflow/dsl"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
)

// effects stands in for the daemon's pipeline in these tests (the e2e
// tests run the real one): it records calls and fails where told.
type effects struct {
	mu    sync.Mutex
	calls []string
	// failFirst fails the first n calls of a tool.
	failFirst map[string]int
	// block, when set, is waited on by calls of tool "block".
	block chan struct{}
	// deaf: a call of "block" waits for block alone, as a call that does
	// not stop at once when cancelled.
	deaf bool
}

func (f *effects) CallMCP(ctx context.Context, c MCPCall) (any, error) {
	name, _ := c.Params["name"].(string)
	f.mu.Lock()
	f.calls = append(f.calls, c.Server+"/"+name)
	n := f.failFirst[name]
	if n > 0 {
		f.failFirst[name] = n - 1
	}
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if name == "block" && f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			if !f.deaf {
				return nil, ctx.Err()
			}
			<-f.block
		}
	}
	if n > 0 {
		return nil, &Error{Type: ErrCommunication, Status: 503, Title: "ToolError", Detail: "flaky"}
	}
	return map[string]any{"tool": name, "args": c.Params["arguments"]}, nil
}

func (f *effects) RunScript(ctx context.Context, s Script) (any, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "script")
	f.mu.Unlock()
	var n float64
	b, _ := json.Marshal(s.Arguments["n"])
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	return map[string]any{"doubled": n * 2}, nil
}

func (f *effects) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

func newStore(t testing.TB) *workspace.Manager {
	m, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func load(t testing.TB, src string) *dsl.Document {
	d, err := dsl.Load("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const flow = `
document: {dsl: 1.0.0, namespace: test, name: flow, version: 1.0.0}
input:
  schema:
    document:
      type: object
      required: [names]
do:
  - each:
      for: {each: name, in: .names}
      do:
        - remember:
            call: mcp
            with: {server: memory, tool: create, arguments: {name: "${ $name }"}}
  - flaky:
      try:
        - fetch:
            call: mcp
            with: {server: fs, tool: read}
      catch:
        errors: {with: {status: 503}}
        retry: {delay: {milliseconds: 1}, limit: {attempt: {count: 3}}}
  - decide:
      switch:
        - big: {when: "${ $workflow.input.names | length > 1 }", then: compute}
        - default: {then: end}
  - compute:
      set: {n: "${ $workflow.input.names | length }"}
      export: {as: "${ {n: .n} }"}
  - script:
      run:
        script:
          language: python
          code: 'result({"doubled": n * 2})'
          arguments: {n: "${ $context.n }"}
`

func TestRunFlow(t *testing.T) {
	fx := &effects{failFirst: map[string]int{"read": 2}}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, flow), Input: json.RawMessage(`{"names":["ada","bob"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	st, err = e.Wait(ctx, "acme", st.Run)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateCompleted {
		t.Fatalf("state %s, error %v", st.State, st.Error)
	}
	if string(st.Output) != `{"doubled":4}` {
		t.Errorf("output %s", st.Output)
	}
	if n := fx.count("fs/read"); n != 3 {
		t.Errorf("read called %d times, want 3 (two failures retried)", n)
	}
	if n := fx.count("memory/create"); n != 2 {
		t.Errorf("create called %d times, want 2", n)
	}
	logs, _ := e.Logs(ctx, "acme", st.Run)
	caught := 0
	for _, r := range logs {
		if r.Kind == KindCaught {
			caught++
		}
	}
	if caught != 2 {
		t.Errorf("%d caught records, want 2", caught)
	}
}

func TestStartChecksInput(t *testing.T) {
	e := NewEmbedded(Options{Journals: newStore(t), Effects: &effects{}})
	defer e.Close()
	_, err := e.Start(context.Background(), StartRequest{Tenant: "acme", Document: load(t, flow), Input: json.RawMessage(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "names") {
		t.Fatalf("want an error naming the missing field, got %v", err)
	}
}

func TestUncaughtFailure(t *testing.T) {
	fx := &effects{failFirst: map[string]int{"read": 5}}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, flow), Input: json.RawMessage(`{"names":["a"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	st, _ = e.Wait(ctx, "acme", st.Run)
	if st.State != StateFailed || st.Error == nil || st.Error.Status != 503 {
		t.Fatalf("state %s error %+v", st.State, st.Error)
	}
	// The read now works: resume retries only what failed.
	fx.mu.Lock()
	fx.failFirst["read"] = 0
	fx.mu.Unlock()
	if _, err := e.Resume(ctx, "acme", st.Run); err != nil {
		t.Fatal(err)
	}
	st, _ = e.Wait(ctx, "acme", st.Run)
	if st.State != StateCompleted {
		t.Fatalf("after resume: %s %v", st.State, st.Error)
	}
	if n := fx.count("memory/create"); n != 1 {
		t.Errorf("create ran %d times; the finished task must not run again", n)
	}
}

const listenDoc = `
document: {dsl: 1.0.0, namespace: test, name: approve, version: 1.0.0}
do:
  - ask:
      listen:
        to:
          one: {with: {type: approval}}
  - check:
      switch:
        - yes: {when: .approved, then: act}
        - default: {then: end}
  - act:
      call: mcp
      with: {server: fs, tool: write}
`

func TestListenSignal(t *testing.T) {
	fx := &effects{}
	waiting := make(chan Pending, 1)
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx, OnWaiting: func(_, _ string, p Pending) { waiting <- p }})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, listenDoc)})
	if err != nil {
		t.Fatal(err)
	}
	p := <-waiting
	if p.Task != "ask" || p.Events[0] != "approval" {
		t.Fatalf("pending %+v", p)
	}
	if st, _ := e.Status(ctx, "acme", st.Run); st.State != StateWaiting || len(st.Waiting) != 1 {
		t.Fatalf("status %+v", st)
	}
	if _, err := e.Status(ctx, "other", st.Run); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("another tenant sees the run: %v", err)
	}
	if err := e.Signal(ctx, "other", st.Run, "approval", nil); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("another tenant signals the run: %v", err)
	}
	err = e.Signal(ctx, "acme", st.Run, "other", nil)
	if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "approval") {
		t.Fatalf("wrong event: %v", err)
	}
	if err := e.Signal(ctx, "acme", st.Run, "approval", json.RawMessage(`{"approved":true}`)); err != nil {
		t.Fatal(err)
	}
	st, _ = e.Wait(ctx, "acme", st.Run)
	if st.State != StateCompleted || fx.count("fs/write") != 1 {
		t.Fatalf("state %s, writes %d", st.State, fx.count("fs/write"))
	}
}

const blockDoc = `
document: {dsl: 1.0.0, namespace: test, name: block, version: 1.0.0}
do:
  - first:
      call: mcp
      with: {server: s, tool: one}
  - second:
      call: mcp
      with: {server: s, tool: block}
  - third:
      call: mcp
      with: {server: s, tool: three}
`

// startBlocked starts a run of blockDoc on e and returns once its second
// task, the call of "block", is in flight.
func startBlocked(t *testing.T, e *Embedded, fx *effects) Status {
	t.Helper()
	st, err := e.Start(context.Background(), StartRequest{Tenant: "acme", Document: load(t, blockDoc)})
	if err != nil {
		t.Fatal(err)
	}
	for fx.count("s/block") == 0 {
		waitAMoment()
	}
	return st
}

// TestResumeAfterStop stops the engine while a task is in flight, as a
// crash would, and resumes the run in a new engine over the same journal.
func TestResumeAfterStop(t *testing.T) {
	store := newStore(t)
	fx := &effects{block: make(chan struct{})}
	e := NewEmbedded(Options{Journals: store, Effects: fx})
	ctx := context.Background()
	st := startBlocked(t, e, fx)
	e.Close()
	if st, _ := (NewEmbedded(Options{Journals: store})).Status(ctx, "acme", st.Run); st.State != StateInterrupted {
		t.Fatalf("after stop: %s", st.State)
	}
	close(fx.block)
	e2 := NewEmbedded(Options{Journals: store, Effects: fx})
	defer e2.Close()
	if n, err := e2.ResumeAll(ctx); n != 1 || err != nil {
		t.Fatalf("resumed %d: %v", n, err)
	}
	st, _ = e2.Wait(ctx, "acme", st.Run)
	if st.State != StateCompleted {
		t.Fatalf("state %s %v", st.State, st.Error)
	}
	if fx.count("s/one") != 1 || fx.count("s/block") != 2 || fx.count("s/three") != 1 {
		t.Errorf("calls %v: one once, block twice (in flight at the stop), three once", fx.calls)
	}
	logs, _ := e2.Logs(ctx, "acme", st.Run)
	seen := map[string]bool{}
	reruns := 0
	for _, r := range logs {
		if r.Kind == KindDone {
			if seen[r.Path] {
				t.Errorf("task %s finished twice", r.Path)
			}
			seen[r.Path] = true
		}
		if r.Kind == KindRerun {
			reruns++
		}
	}
	if reruns != 1 {
		t.Errorf("%d rerun records, want 1", reruns)
	}
}

func TestCancel(t *testing.T) {
	fx := &effects{block: make(chan struct{})}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st := startBlocked(t, e, fx)
	if err := e.Cancel(ctx, "acme", st.Run); err != nil {
		t.Fatal(err)
	}
	st, _ = e.Status(ctx, "acme", st.Run)
	if st.State != StateCancelled {
		t.Fatalf("state %s", st.State)
	}
	if _, err := e.Resume(ctx, "acme", st.Run); !errors.Is(err, ErrState) {
		t.Fatalf("resume of a cancelled run: %v", err)
	}
}

// TestCancelSlowRun: a cancel answers after CancelWait when the run takes
// longer to stop, with the run cancelling, and the run then ends cancelled.
func TestCancelSlowRun(t *testing.T) {
	fx := &effects{block: make(chan struct{}), deaf: true}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx, CancelWait: 20 * time.Millisecond})
	defer e.Close()
	ctx := context.Background()
	st := startBlocked(t, e, fx)
	if err := e.Cancel(ctx, "acme", st.Run); err != nil {
		t.Fatalf("cancel of a run slow to stop: %v", err)
	}
	if st, _ = e.Status(ctx, "acme", st.Run); st.State != StateCancelling {
		t.Fatalf("state %s after the cancel answered, want cancelling", st.State)
	}
	close(fx.block)
	if st, _ = e.Wait(ctx, "acme", st.Run); st.State != StateCancelled {
		t.Fatalf("state %s once the call returned, want cancelled", st.State)
	}
	if n := fx.count("s/three"); n != 0 {
		t.Errorf("the task after the cancel ran %d times", n)
	}
}

// TestCancelThenStop: cexecd stops while a cancelled run is still stopping;
// the run ends cancelled then, not at the next start.
func TestCancelThenStop(t *testing.T) {
	store := newStore(t)
	fx := &effects{block: make(chan struct{}), deaf: true}
	e := NewEmbedded(Options{Journals: store, Effects: fx, CancelWait: 20 * time.Millisecond})
	ctx := context.Background()
	st := startBlocked(t, e, fx)
	if err := e.Cancel(ctx, "acme", st.Run); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		e.Close()
	}()
	<-e.ctx.Done()
	close(fx.block)
	<-closed
	e2 := NewEmbedded(Options{Journals: store, Effects: fx})
	defer e2.Close()
	if st, _ = e2.Status(ctx, "acme", st.Run); st.State != StateCancelled {
		t.Fatalf("state %s after the stop, want cancelled", st.State)
	}
	if n, err := e2.ResumeAll(ctx); n != 0 || err != nil {
		t.Fatalf("the next start resumed %d runs: %v", n, err)
	}
	if st, _ = e2.Status(ctx, "acme", st.Run); st.State != StateCancelled {
		t.Fatalf("state %s, want cancelled", st.State)
	}
	if n := fx.count("s/three"); n != 0 {
		t.Errorf("the task after the cancel ran %d times", n)
	}
}

// TestCancelThenKilled: cexecd dies after journaling a cancel and before
// the run ended; its next start ends the run cancelled instead of
// resuming it.
func TestCancelThenKilled(t *testing.T) {
	store := newStore(t)
	fx := &effects{block: make(chan struct{})}
	e := NewEmbedded(Options{Journals: store, Effects: fx})
	ctx := context.Background()
	st := startBlocked(t, e, fx)
	// The moment of the crash: the cancel is journaled, the run not yet
	// told.
	if _, err := e.live("acme", st.Run).j.append(Record{Kind: KindCancel}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e2 := NewEmbedded(Options{Journals: store, Effects: fx})
	defer e2.Close()
	if st, _ = e2.Status(ctx, "acme", st.Run); st.State != StateCancelling {
		t.Fatalf("state %s before the next start's resume, want cancelling", st.State)
	}
	if n, err := e2.ResumeAll(ctx); n != 0 || err != nil {
		t.Fatalf("the next start resumed %d runs: %v", n, err)
	}
	if st, _ = e2.Status(ctx, "acme", st.Run); st.State != StateCancelled {
		t.Fatalf("state %s, want cancelled", st.State)
	}
	if fx.count("s/block") != 1 || fx.count("s/three") != 0 {
		t.Errorf("calls %v: block once (before the cancel), three never", fx.calls)
	}
}

// TestConcurrencyLimit holds a tenant to MaxConcurrent runs at once.
func TestConcurrencyLimit(t *testing.T) {
	fx := &effects{block: make(chan struct{})}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx, MaxConcurrent: 1})
	defer e.Close()
	ctx := context.Background()
	a, _ := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, blockDoc)})
	b, _ := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, blockDoc)})
	for fx.count("s/block") == 0 {
		waitAMoment()
	}
	sa, _ := e.Status(ctx, "acme", a.Run)
	sb, _ := e.Status(ctx, "acme", b.Run)
	if fmt.Sprintf("%s %s", sa.State, sb.State) != "running queued" && fmt.Sprintf("%s %s", sa.State, sb.State) != "queued running" {
		t.Fatalf("states %s %s, want one running and one queued", sa.State, sb.State)
	}
	close(fx.block)
	for _, id := range []string{a.Run, b.Run} {
		if st, _ := e.Wait(ctx, "acme", id); st.State != StateCompleted {
			t.Errorf("run %s: %s", id, st.State)
		}
	}
}

const contextDoc = `
document: {dsl: 1.0.0, namespace: test, name: ctx, version: 1.0.0}
do:
  - prep:
      do:
        - inner:
            set: {v: 7}
            export: {as: "${ {v: .v} }"}
  - second:
      call: mcp
      with: {server: s, tool: block}
  - third:
      set: {v: "${ $context.v }"}
`

// TestResumeKeepsContext resumes a run whose $context was set inside a
// finished composite task, which a resumed run skips as a whole.
func TestResumeKeepsContext(t *testing.T) {
	store := newStore(t)
	fx := &effects{block: make(chan struct{})}
	e := NewEmbedded(Options{Journals: store, Effects: fx})
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, contextDoc)})
	if err != nil {
		t.Fatal(err)
	}
	for fx.count("s/block") == 0 {
		waitAMoment()
	}
	e.Close()
	close(fx.block)
	e2 := NewEmbedded(Options{Journals: store, Effects: fx})
	defer e2.Close()
	if _, err := e2.ResumeAll(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = e2.Wait(ctx, "acme", st.Run)
	if st.State != StateCompleted || string(st.Output) != `{"v":7}` {
		t.Fatalf("state %s output %s", st.State, st.Output)
	}
}

// TestWaitingRunGivesSlotBack holds a tenant to one run at a time: a run
// waiting for a signal does not keep another from running.
func TestWaitingRunGivesSlotBack(t *testing.T) {
	fx := &effects{}
	waiting := make(chan Pending, 1)
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx, MaxConcurrent: 1, OnWaiting: func(_, _ string, p Pending) { waiting <- p }})
	defer e.Close()
	ctx := context.Background()
	a, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, listenDoc)})
	if err != nil {
		t.Fatal(err)
	}
	<-waiting
	b, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, flow), Input: json.RawMessage(`{"names":["x"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Wait(ctx, "acme", b.Run); st.State != StateCompleted {
		t.Fatalf("second run: %s %v", st.State, st.Error)
	}
	if err := e.Signal(ctx, "acme", a.Run, "approval", json.RawMessage(`{"approved":false}`)); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Wait(ctx, "acme", a.Run); st.State != StateCompleted {
		t.Fatalf("first run: %s %v", st.State, st.Error)
	}
}

// TestListenAsk: a listen's metadata.ask is evaluated when it begins to wait
// and journaled, so OnWaiting and Status carry the question.
func TestListenAsk(t *testing.T) {
	const doc = `
document: {dsl: 1.0.0, namespace: test, name: ask, version: 1.0.0}
input:
  from: '${ {field: .field} }'
do:
  - ask:
      metadata:
        ask:
          type: object
          properties: '${ {(.field): {type: "string", default: "x"}} }'
      listen:
        to:
          one: {with: {type: form}}
  - plain:
      listen:
        to:
          one: {with: {type: go}}
`
	waiting := make(chan Pending, 2)
	e := NewEmbedded(Options{Journals: newStore(t), Effects: &effects{}, OnWaiting: func(_, _ string, p Pending) { waiting <- p }})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, doc), Input: json.RawMessage(`{"field": "city"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"properties":{"city":{"default":"x","type":"string"}},"type":"object"}`
	if p := <-waiting; string(p.Ask) != want {
		t.Fatalf("OnWaiting ask %s, want %s", p.Ask, want)
	}
	if st, _ := e.Status(ctx, "acme", st.Run); len(st.Waiting) != 1 || string(st.Waiting[0].Ask) != want {
		t.Fatalf("status %+v", st)
	}
	if err := e.Signal(ctx, "acme", st.Run, "form", json.RawMessage(`{"city":"Paris"}`)); err != nil {
		t.Fatal(err)
	}
	if p := <-waiting; p.Task != "plain" || p.Ask != nil {
		t.Fatalf("a listen without metadata.ask carries %+v", p)
	}
}

// TestResumeOnce resumes one failed run from several callers at once (an
// operator's resume racing another, or cexecd's start): exactly one
// resumes it, so its failed task runs once more, not once per caller.
func TestResumeOnce(t *testing.T) {
	fx := &effects{failFirst: map[string]int{"block": 1}}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, blockDoc)})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ = e.Wait(ctx, "acme", st.Run); st.State != StateFailed {
		t.Fatalf("state %s, want failed", st.State)
	}
	fx.block = make(chan struct{})
	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.Resume(ctx, "acme", st.Run)
		}()
	}
	wg.Wait()
	resumed := 0
	for _, err := range errs {
		switch {
		case err == nil:
			resumed++
		case !errors.Is(err, ErrState):
			t.Errorf("resume: %v", err)
		}
	}
	close(fx.block)
	if st, _ = e.Wait(ctx, "acme", st.Run); st.State != StateCompleted {
		t.Fatalf("state %s %v", st.State, st.Error)
	}
	if resumed != 1 || fx.count("s/block") != 2 {
		t.Errorf("%d of %d callers resumed the run and block ran %d times; want 1 and 2", resumed, callers, fx.count("s/block"))
	}
}

// TestResumedRunStatus: a failed run that is resumed shows as running (or
// queued) while it runs again, not as the failure it had before.
func TestResumedRunStatus(t *testing.T) {
	fx := &effects{failFirst: map[string]int{"block": 1}}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, blockDoc)})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ = e.Wait(ctx, "acme", st.Run); st.State != StateFailed {
		t.Fatalf("state %s, want failed", st.State)
	}
	fx.block = make(chan struct{})
	defer close(fx.block)
	rs, err := e.Resume(ctx, "acme", st.Run)
	if err != nil {
		t.Fatal(err)
	}
	if rs.State != StateQueued && rs.State != StateRunning || rs.Error != nil {
		t.Errorf("Resume returned state %s error %v, want queued or running", rs.State, rs.Error)
	}
	for fx.count("s/block") < 2 {
		waitAMoment()
	}
	if st, _ := e.Status(ctx, "acme", st.Run); st.State != StateRunning || st.Error != nil {
		t.Errorf("status of the resumed run: %s %v, want running", st.State, st.Error)
	}
}

// TestSignalOnce signals one waiting listen from several callers at once:
// one signal is taken and the others are refused, never accepted and then
// dropped.
func TestSignalOnce(t *testing.T) {
	const doc = `
document: {dsl: 1.0.0, namespace: test, name: one, version: 1.0.0}
do:
  - ask:
      listen:
        to:
          one: {with: {type: answer}}
`
	waiting := make(chan Pending, 1)
	e := NewEmbedded(Options{Journals: newStore(t), Effects: &effects{}, OnWaiting: func(_, _ string, p Pending) { waiting <- p }})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, doc)})
	if err != nil {
		t.Fatal(err)
	}
	<-waiting
	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Signal(ctx, "acme", st.Run, "answer", json.RawMessage(fmt.Sprintf(`{"from":%d}`, i)))
		}()
	}
	wg.Wait()
	st, _ = e.Wait(ctx, "acme", st.Run)
	var taken []string
	for i, err := range errs {
		if err == nil {
			taken = append(taken, fmt.Sprintf(`{"from":%d}`, i))
		} else if !errors.Is(err, ErrState) {
			t.Errorf("signal: %v", err)
		}
	}
	if len(taken) != 1 || string(st.Output) != taken[0] {
		t.Errorf("signals accepted %v, run output %s; want one accepted and its data the output", taken, st.Output)
	}
}

// TestListenAnyEvent: a listen to.any with no filters takes any event, as
// the DSL says, and so does a filter without a type.
func TestListenAnyEvent(t *testing.T) {
	for _, to := range []string{"any: []", "one: {with: {source: x}}"} {
		doc := "document: {dsl: 1.0.0, namespace: test, name: any, version: 1.0.0}\ndo:\n  - ask:\n      listen:\n        to:\n          " + to + "\n"
		waiting := make(chan Pending, 1)
		e := NewEmbedded(Options{Journals: newStore(t), Effects: &effects{}, OnWaiting: func(_, _ string, p Pending) { waiting <- p }})
		ctx := context.Background()
		st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, doc)})
		if err != nil {
			t.Fatal(err)
		}
		if p := <-waiting; len(p.Events) != 1 || p.Events[0] != "" {
			t.Errorf("%s: waits for %q, want [\"\"] (any event)", to, p.Events)
		}
		if err := e.Signal(ctx, "acme", st.Run, "whatever", json.RawMessage(`{"ok":true}`)); err != nil {
			t.Errorf("%s: signal: %v", to, err)
		} else if st, _ = e.Wait(ctx, "acme", st.Run); string(st.Output) != `{"ok":true}` {
			t.Errorf("%s: state %s output %s", to, st.State, st.Output)
		}
		e.Close()
	}
}

// TestForkFailsFast: when a branch of a fork fails, the fork fails then,
// its other branches cancelled, not when they end (a listen never might),
// and with the failing branch's error.
func TestForkFailsFast(t *testing.T) {
	const doc = `
document: {dsl: 1.0.0, namespace: test, name: fork, version: 1.0.0}
do:
  - both:
      fork:
        branches:
          - waits:
              listen:
                to:
                  one: {with: {type: never}}
          - bad:
              raise:
                error: {type: https://example.com/e, status: 500, title: Boom}
`
	e := NewEmbedded(Options{Journals: newStore(t), Effects: &effects{}})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, doc)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err = e.Wait(wctx, "acme", st.Run)
	if err != nil {
		t.Fatalf("the fork still runs after a branch failed: %s", st.State)
	}
	if st.State != StateFailed || st.Error == nil || st.Error.Title != "Boom" {
		t.Fatalf("state %s error %+v, want failed with Boom", st.State, st.Error)
	}
}

// TestListenTimedOut: a listen cut by its timeout no longer waits: status
// does not list it and a signal for it is refused, not taken and dropped.
func TestListenTimedOut(t *testing.T) {
	const doc = `
document: {dsl: 1.0.0, namespace: test, name: lt, version: 1.0.0}
do:
  - guarded:
      try:
        - ask:
            timeout: {after: {milliseconds: 10}}
            listen:
              to:
                one: {with: {type: approval}}
      catch:
        do:
          - none: {set: {approved: false}}
  - later:
      call: mcp
      with: {server: s, tool: block}
`
	fx := &effects{block: make(chan struct{})}
	defer close(fx.block)
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, doc)})
	if err != nil {
		t.Fatal(err)
	}
	for fx.count("s/block") == 0 {
		waitAMoment()
	}
	if st, _ := e.Status(ctx, "acme", st.Run); st.State != StateRunning || len(st.Waiting) != 0 {
		t.Errorf("status %s waiting %+v, want running and no wait", st.State, st.Waiting)
	}
	if err := e.Signal(ctx, "acme", st.Run, "approval", json.RawMessage(`{"approved":true}`)); !errors.Is(err, ErrState) {
		t.Errorf("a signal for the timed-out listen: %v, want it refused", err)
	}
}

// TestResumeJournaledUnderOlderChecks: a run journaled by a cexec whose load
// checks were laxer (an undefined jq function, a year-long wait and a retry
// without a limit, all on a path the run does not take) still resumes;
// a fresh load refuses the same document.
func TestResumeJournaledUnderOlderChecks(t *testing.T) {
	const src = `
document: {dsl: 1.0.0, namespace: test, name: lax, version: 1.0.0}
do:
  - first:
      call: mcp
      with: {server: s, tool: one}
  - second:
      call: mcp
      with: {server: s, tool: block}
  - never:
      if: ${ false }
      try:
        - pause:
            wait: P1Y
        - shout:
            set: {x: "${ nosuchfn(1) }"}
      catch:
        retry: {delay: {seconds: 1}}
`
	if _, err := dsl.Load("lax.yaml", []byte(src)); err == nil {
		t.Fatal("a fresh load accepted the document; the test needs one it refuses")
	}
	doc, err := dsl.LoadWith("lax.yaml", []byte(src), dsl.Options{Journaled: true})
	if err != nil {
		t.Fatalf("journaled load: %v", err)
	}
	fx := &effects{failFirst: map[string]int{"block": 1}}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: doc})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ = e.Wait(ctx, "acme", st.Run); st.State != StateFailed {
		t.Fatalf("state %s, want failed", st.State)
	}
	if _, err := e.Resume(ctx, "acme", st.Run); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if st, _ = e.Wait(ctx, "acme", st.Run); st.State != StateCompleted {
		t.Fatalf("state %s %v, want completed", st.State, st.Error)
	}
}

// TestCancelJustEnded: a cancel that finds a run which has just ended, in
// the moment before the engine forgets it, is refused as for any ended run
// rather than reported done with a cancel record after the end.
func TestCancelJustEnded(t *testing.T) {
	fx := &effects{block: make(chan struct{})}
	e := NewEmbedded(Options{Journals: newStore(t), Effects: fx})
	defer e.Close()
	ctx := context.Background()
	st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, blockDoc)})
	if err != nil {
		t.Fatal(err)
	}
	r := e.live("acme", st.Run)
	if r == nil {
		t.Fatal("the run is not live after Start")
	}
	close(fx.block)
	if st, _ = e.Wait(ctx, "acme", st.Run); st.State != StateCompleted {
		t.Fatalf("state %s, want completed", st.State)
	}
	e.mu.Lock()
	e.runs[key("acme", st.Run)] = r
	e.mu.Unlock()
	if err := e.Cancel(ctx, "acme", st.Run); !errors.Is(err, ErrState) {
		t.Errorf("Cancel of a run that just ended = %v, want ErrState", err)
	}
	if st, _ = e.Status(ctx, "acme", st.Run); st.State != StateCompleted {
		t.Errorf("state %s after the refused cancel, want completed", st.State)
	}
	j, err := e.load("acme", st.Run)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range j.records {
		if rec.Kind == KindCancel {
			t.Error("the journal has a cancel record after the run's end")
		}
	}
}

// sharedJournals returns a maker of workspace managers over one data_dir
// shared as replicas share it: each is one replica's journals.
func sharedJournals(t *testing.T) func() *workspace.Manager {
	dir := t.TempDir()
	return func() *workspace.Manager {
		m, err := workspace.New(workspace.Options{DataDir: dir, SharedDataDir: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
}

// TestRunHeldByAnotherReplica: replicas share the journals (one data_dir);
// a run one of them executes is not resumed by another, neither at its
// start (ResumeAll) nor by an operator's resume there, and shows there as
// running, not interrupted. Once the first engine stops, the run is free
// to resume anywhere.
func TestRunHeldByAnotherReplica(t *testing.T) {
	shared := sharedJournals(t)
	fx1 := &effects{block: make(chan struct{})}
	e1 := NewEmbedded(Options{Journals: shared(), Effects: fx1})
	ctx := context.Background()
	st, err := e1.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, blockDoc)})
	if err != nil {
		t.Fatal(err)
	}
	for fx1.count("s/block") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	fx2 := &effects{}
	e2 := NewEmbedded(Options{Journals: shared(), Effects: fx2})
	defer e2.Close()
	if n, err := e2.ResumeAll(ctx); n != 0 || err != nil {
		t.Errorf("the other replica's ResumeAll resumed %d runs (%v); want 0: the run is running", n, err)
	}
	if _, err := e2.Resume(ctx, "acme", st.Run); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "another replica") {
		t.Errorf("resume on the other replica: %v; want ErrState naming another replica", err)
	}
	if s, _ := e2.Status(ctx, "acme", st.Run); s.State != StateRunning {
		t.Errorf("status on the other replica %s, want %s", s.State, StateRunning)
	}
	if err := e2.Signal(ctx, "acme", st.Run, "go", nil); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "another replica") {
		t.Errorf("signal on the other replica: %v; want ErrState naming another replica", err)
	}
	if err := e2.Cancel(ctx, "acme", st.Run); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "another replica") {
		t.Errorf("cancel on the other replica: %v; want ErrState naming another replica", err)
	}
	e1.Close() // the replica stops mid-run: its runs are free
	if _, err := e2.Resume(ctx, "acme", st.Run); err != nil {
		t.Fatalf("resume after the first replica stopped: %v", err)
	}
	if s, _ := e2.Wait(ctx, "acme", st.Run); s.State != StateCompleted {
		t.Fatalf("state %s %v", s.State, s.Error)
	}
	if n := fx2.count("s/three"); n != 1 {
		t.Errorf("third ran %d times on the second replica, want 1", n)
	}
}

// TestForwardToHolder: two engines over one data_dir, as two replicas; a
// Signal or Cancel on the one that does not run the run goes through
// Options.Forward to the other's Apply, and comes back with its answer.
func TestForwardToHolder(t *testing.T) {
	shared := sharedJournals(t)
	fx := &effects{}
	a := NewEmbedded(Options{Journals: shared(), Effects: fx})
	defer a.Close()
	var forwarded []Forwarded
	b := NewEmbedded(Options{Journals: shared(), Effects: fx, Forward: func(ctx context.Context, f Forwarded) error {
		forwarded = append(forwarded, f)
		here, err := a.Apply(ctx, f)
		if !here {
			return errors.New("not here")
		}
		return err
	}})
	defer b.Close()
	ctx := context.Background()
	start := func() string {
		st, err := a.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, listenDoc)})
		if err != nil {
			t.Fatal(err)
		}
		for st.State != StateWaiting {
			time.Sleep(10 * time.Millisecond)
			st, _ = a.Status(ctx, "acme", st.Run)
		}
		return st.Run
	}

	run := start()
	if err := b.Signal(ctx, "acme", run, "approval", json.RawMessage(`{"approved":`)); !errors.Is(err, pluginapi.ErrInvalidArgument) || len(forwarded) != 0 {
		t.Errorf("bad data through b: %v, %d forwarded", err, len(forwarded))
	}
	if err := b.Signal(ctx, "acme", run, "other", nil); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), `does not wait for event "other"`) {
		t.Errorf("wrong event through b: %v", err)
	}
	if err := b.Signal(ctx, "acme", run, "approval", json.RawMessage(`{"approved":true}`)); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.Wait(ctx, "acme", run); st.State != StateCompleted {
		t.Fatalf("run after the signal through b: %s", st.State)
	}
	if here, _ := b.Apply(ctx, Forwarded{Tenant: "acme", Run: run, Op: OpSignal, Event: "approval"}); here {
		t.Error("b applies a request for a run it does not run")
	}

	run = start()
	if err := b.Cancel(ctx, "acme", run); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.Status(ctx, "acme", run); st.State != StateCancelled {
		t.Fatalf("run after the cancel through b: %s", st.State)
	}
	if len(forwarded) != 3 || forwarded[2].Op != OpCancel {
		t.Errorf("forwarded %+v", forwarded)
	}
}
