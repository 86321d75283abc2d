package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

func TestSessionAppendReadList(t *testing.T) {
	clk := newClock()
	m := newManager(t, Options{Now: clk.Now})
	tn := mustTenant(t, m, "acme")

	appendOK := func(session string, e Entry) Entry {
		t.Helper()
		got, err := tn.Append(session, e)
		if err != nil {
			t.Fatalf("Append(%s): %v", session, err)
		}
		clk.Advance(time.Second)
		return got
	}
	e1 := appendOK("s1", Entry{Kind: KindExecution, Task: "count rows", Code: "print(1)",
		Result: &Result{OK: true, Output: "1\n"}, Duration: Duration(1500 * time.Microsecond),
		ToolCalls:  []ToolCall{{Server: "db", Tool: "query", Duration: Duration(time.Millisecond), OK: true}},
		StateFiles: []string{"rows.json"}})
	appendOK("s2", Entry{Kind: KindExecution, Code: "x = 1\nprint(x)", Result: &Result{OK: false, ErrorType: "NameError"}})
	appendOK("s1", Entry{Kind: KindExecution, Code: "raise SystemExit(3)", Result: &Result{OK: false, ExitCode: 3}, StateFiles: []string{"a.yaml"}})
	cp := appendOK("s1", Entry{Kind: KindCheckpoint, Step: "loaded", Context: json.RawMessage(`{"page":2}`)})
	if e1.Seq != 1 || cp.Seq != 3 || !e1.Time.Equal(newClock().Now()) {
		t.Errorf("seq/time = %d %d %v", e1.Seq, cp.Seq, e1.Time)
	}

	log, err := tn.ReadSession("s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 3 || len(log.Problems) != 0 {
		t.Fatalf("ReadSession: %d entries, problems %v", len(log.Entries), log.Problems)
	}
	got := log.Entries[0]
	if got.Task != "count rows" || got.Result == nil || got.Result.Output != "1\n" || got.Duration != Duration(1500*time.Microsecond) ||
		len(got.ToolCalls) != 1 || got.ToolCalls[0].Tool != "query" || string(log.Entries[2].Context) != `{"page":2}` {
		t.Errorf("entry did not round-trip: %+v", got)
	}
	info := log.Info
	if info.Entries != 3 || info.Executions != 2 || info.Failures != 1 || info.Checkpoints != 1 ||
		info.LastTask != "raise SystemExit(3)" || info.LastStep != "loaded" ||
		!slices.Equal(info.StateFiles, []string{"a.yaml", "rows.json"}) {
		t.Errorf("info = %+v", info)
	}

	list, err := tn.ListSessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "s1" || list[1].ID != "s2" {
		t.Fatalf("ListSessions order = %+v", list)
	}
	if list[0].Entries != 3 || list[0].LogBytes == 0 || list[1].Failures != 1 {
		t.Errorf("ListSessions = %+v", list)
	}

	// Logs live outside the workspace, readable by the daemon only.
	path := filepath.Join(tn.dir, "sessions", "s1.jsonl")
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("log %s: %v, mode %v", path, err, st.Mode())
	}
	if strings.HasPrefix(path, tn.WorkspaceDir()) {
		t.Error("session log inside the workspace")
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), `"duration_ms":1.5`) {
		t.Errorf("durations should be logged in milliseconds: %s", raw)
	}

	if _, err := tn.ReadSession("nope"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("ReadSession(nope) = %v, want ErrNotFound", err)
	}
	if _, err := tn.Append("../x", Entry{Kind: KindExecution}); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("Append with a bad session id = %v", err)
	}
	if _, err := tn.Append("s1", Entry{Kind: "Bad Kind"}); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("Append with a bad kind = %v", err)
	}
}

func TestSessionTornLastLine(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	for i := range 2 {
		if _, err := tn.Append("s", Entry{Kind: KindExecution, Code: fmt.Sprint("step", i)}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(tn.dir, "sessions", "s.jsonl")
	good, _ := os.ReadFile(path)
	// A crash in the middle of the third append.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":3,"time":"2026-03-01T12:00:00Z","kind":"execu`)
	f.Close()

	log, err := tn.ReadSession("s")
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 2 || len(log.Problems) != 1 || !log.Problems[0].Torn || log.Problems[0].Line != 3 ||
		log.Problems[0].Offset != int64(len(good)) {
		t.Fatalf("ReadSession with a torn tail: %d entries, problems %+v", len(log.Entries), log.Problems)
	}
	list, err := tn.ListSessions()
	if err != nil || len(list) != 1 || list[0].Entries != 2 || list[0].BadLines != 1 {
		t.Fatalf("ListSessions = %+v, %v", list, err)
	}
	if r, err := tn.Resume("s"); err != nil || len(r.Recent) != 2 {
		t.Fatalf("Resume = %+v, %v", r, err)
	}

	// The next append cuts the torn line off instead of gluing onto it.
	e, err := tn.Append("s", Entry{Kind: KindExecution, Code: "step2"})
	if err != nil || e.Seq != 3 {
		t.Fatalf("Append after a torn line = %+v, %v", e, err)
	}
	log, _ = tn.ReadSession("s")
	if len(log.Entries) != 3 || len(log.Problems) != 0 || log.Entries[2].Code != "step2" || log.Info.BadLines != 0 {
		t.Fatalf("after repair: %d entries, problems %+v, info %+v", len(log.Entries), log.Problems, log.Info)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), string(good)) {
		t.Error("repair changed earlier lines")
	}

	// A damaged line in the middle is skipped; its neighbours stay readable.
	damaged := strings.Replace(string(data), `"code":"step1"`, `"code":"step1`, 1)
	if err := os.WriteFile(path, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	log, _ = tn.ReadSession("s")
	if len(log.Entries) != 2 || len(log.Problems) != 1 || log.Problems[0].Torn || log.Problems[0].Line != 2 {
		t.Fatalf("damaged middle line: %d entries, problems %+v", len(log.Entries), log.Problems)
	}
	if e, err := tn.Append("s", Entry{Kind: KindExecution}); err != nil || e.Seq != 4 {
		t.Fatalf("Append after damage = %+v, %v", e, err)
	}
}

func TestSessionSummaryRebuilt(t *testing.T) {
	// SyncAlways writes summaries at once, so the test can damage them.
	m := newManager(t, Options{Sync: SyncAlways})
	tn := mustTenant(t, m, "acme")
	for i := range 3 {
		if _, err := tn.Append("s", Entry{Kind: KindExecution, Task: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	meta := filepath.Join(tn.dir, "sessions", "s.meta.json")
	check := func(what string) {
		t.Helper()
		list, err := tn.ListSessions()
		if err != nil || len(list) != 1 || list[0].Entries != 3 || list[0].LastTask != "t2" {
			t.Fatalf("%s: ListSessions = %+v, %v", what, list, err)
		}
	}
	check("fresh")
	os.Remove(meta)
	check("summary deleted")
	if _, err := os.Stat(meta); err != nil {
		t.Errorf("summary not rewritten: %v", err)
	}
	os.WriteFile(meta, []byte(`{"id":"s","entries":1,"log_bytes":3}`), 0o600)
	check("stale summary")
	os.WriteFile(meta, []byte(`{"id":"other","entries":1}`), 0o600)
	check("another session's summary")
	os.WriteFile(meta, []byte(`{garbage`), 0o600)
	check("garbage summary")
	// Appends rebuild a stale summary before counting on it.
	os.Remove(meta)
	if e, err := tn.Append("s", Entry{Kind: KindExecution}); err != nil || e.Seq != 4 {
		t.Fatalf("Append without a summary = %+v, %v", e, err)
	}
}

// TestSessionSummaryBatched: with SyncBatched a summary waits in memory for
// the background pass, is what readers see meanwhile, and is on disk after
// the pass or Close.
func TestSessionSummaryBatched(t *testing.T) {
	m := newManager(t, Options{Sync: SyncBatched, SyncInterval: time.Hour})
	tn := mustTenant(t, m, "acme")
	meta := filepath.Join(tn.dir, "sessions", "s.meta.json")
	for i := range 3 {
		if _, err := tn.Append("s", Entry{Kind: KindExecution, Task: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(meta); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("summary written before the pass: %v", err)
	}
	list, err := tn.ListSessions()
	if err != nil || len(list) != 1 || list[0].Entries != 3 || list[0].LastTask != "t2" {
		t.Fatalf("ListSessions before the pass = %+v, %v", list, err)
	}
	if r, err := tn.Resume("s"); err != nil || len(r.Recent) != 3 {
		t.Fatalf("Resume before the pass = %+v, %v", r, err)
	}
	m.flushAll()
	data, err := os.ReadFile(meta)
	if err != nil {
		t.Fatalf("summary after the pass: %v", err)
	}
	if got, err := parseMeta(data, "s"); err != nil || got.Entries != 3 {
		t.Fatalf("summary on disk = %+v, %v", got, err)
	}
	if _, err := tn.Append("s", Entry{Kind: KindExecution, Task: "t3"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(meta)
	if got, err := parseMeta(data, "s"); err != nil || got.Entries != 4 {
		t.Fatalf("summary after Close = %+v, %v", got, err)
	}
}

// TestSessionInterpreter: where a session's globals are is the last
// execution entry that names an interpreter, also as another replica
// (another Manager on the same data_dir, its summaries still in memory)
// appended it.
func TestSessionInterpreter(t *testing.T) {
	dir := t.TempDir()
	var tn [2]*Tenant
	for i := range tn {
		m := newManager(t, Options{DataDir: dir, Sync: SyncBatched, SyncInterval: time.Hour})
		tn[i] = mustTenant(t, m, "acme")
	}
	where := func(i int) string {
		t.Helper()
		got, err := tn[i].SessionInterpreter("s")
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		return got
	}
	if got := where(0); got != "" {
		t.Errorf("a session without a log: %q", got)
	}
	for _, step := range []struct {
		replica     int
		interpreter string // of the appended entry
		want        string // on both replicas after it
	}{
		{0, "", ""},
		{0, "sbx-acme-1", "sbx-acme-1"},
		{0, "", "sbx-acme-1"}, // a forked execution leaves the globals where they were
		{1, "sbx-acme-2", "sbx-acme-2"},
		{0, "sbx-acme-1", "sbx-acme-1"},
	} {
		if _, err := tn[step.replica].Append("s", Entry{Kind: KindExecution, Interpreter: step.interpreter}); err != nil {
			t.Fatal(err)
		}
		for i := range tn {
			if got := where(i); got != step.want {
				t.Fatalf("after replica %d appended %q: replica %d says %q, want %q", step.replica, step.interpreter, i, got, step.want)
			}
		}
	}
}

func TestResumeAndCheckpoint(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	if _, err := tn.Checkpoint("s", "fetched", json.RawMessage(`{"cursor":"abc","done":[1,2]}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := tn.Append("s", Entry{Kind: KindExecution, Code: fmt.Sprint("code", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tn.Checkpoint("s", "summarised", nil); err != nil {
		t.Fatal(err)
	}
	r, err := tn.Resume("s")
	if err != nil {
		t.Fatal(err)
	}
	if r.Checkpoint == nil || r.Checkpoint.Step != "summarised" || string(r.Checkpoint.Context) != "null" || r.Checkpoint.Seq != 8 {
		t.Fatalf("Resume checkpoint = %+v", r.Checkpoint)
	}
	var seqs []int64
	for _, e := range r.Recent {
		seqs = append(seqs, e.Seq)
	}
	if !slices.Equal(seqs, []int64{4, 5, 6, 7, 8}) || r.Session.Entries != 8 || r.Session.Checkpoints != 2 {
		t.Errorf("Resume recent = %v, session %+v", seqs, r.Session)
	}
	if _, err := tn.Resume("none"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("Resume(none) = %v", err)
	}
	// A session without checkpoints resumes from its entries alone.
	tn.Append("plain", Entry{Kind: KindExecution})
	if r, err := tn.Resume("plain"); err != nil || r.Checkpoint != nil || len(r.Recent) != 1 {
		t.Errorf("Resume(plain) = %+v, %v", r, err)
	}

	tests := []struct {
		step string
		ctx  string
		is   error
	}{
		{"", "1", pluginapi.ErrInvalidArgument},
		{"a\nb", "1", pluginapi.ErrInvalidArgument},
		{strings.Repeat("s", 201), "1", pluginapi.ErrInvalidArgument},
		{"ok", "{", pluginapi.ErrInvalidArgument},
		{"ok", `"` + strings.Repeat("x", MaxCheckpointSize) + `"`, ErrTooLarge},
	}
	for _, tc := range tests {
		if _, err := tn.Checkpoint("s", tc.step, json.RawMessage(tc.ctx)); !errors.Is(err, tc.is) {
			t.Errorf("Checkpoint(%.10q, %.10s) = %v, want %v", tc.step, tc.ctx, err, tc.is)
		}
	}
}

func TestEntryLimits(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	calls := []ToolCall{{Server: "s", Tool: "t", Error: strings.Repeat("e", 5000)}}
	e, err := tn.Append("s", Entry{
		Kind:      KindExecution,
		Code:      strings.Repeat("é", 40000), // 80,000 bytes; must not be cut mid-rune
		Result:    &Result{Value: json.RawMessage(`"` + strings.Repeat("v", 70000) + `"`)},
		ToolCalls: calls,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !e.Truncated || len(e.Code) > maxEntryText+20 || !strings.HasSuffix(e.Code, "…[truncated]") || e.Result.Value != nil {
		t.Errorf("entry not cut: truncated=%v code=%d value=%d", e.Truncated, len(e.Code), len(e.Result.Value))
	}
	if len(calls[0].Error) != 5000 {
		t.Error("Append changed the caller's tool calls")
	}
	log, _ := tn.ReadSession("s")
	if len(log.Entries) != 1 || !strings.HasPrefix(log.Entries[0].Code, "éé") || strings.ContainsRune(log.Entries[0].Code, '\uFFFD') {
		t.Errorf("cut code does not read back cleanly")
	}
}

func TestConcurrentAppends(t *testing.T) {
	m := newManager(t, Options{Sync: SyncNone})
	tn := mustTenant(t, m, "acme")
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				session := fmt.Sprint("s", w%2)
				if _, err := tn.Append(session, Entry{Kind: KindExecution, Code: fmt.Sprint(w, "-", i)}); err != nil {
					errs <- err
				}
				if i%10 == 0 {
					if _, err := tn.ListSessions(); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range []string{"s0", "s1"} {
		log, err := tn.ReadSession(s)
		if err != nil || len(log.Problems) != 0 || len(log.Entries) != writers/2*each {
			t.Fatalf("%s: %d entries, problems %v, %v", s, len(log.Entries), log.Problems, err)
		}
		for i, e := range log.Entries {
			if e.Seq != int64(i+1) {
				t.Fatalf("%s: entry %d has seq %d", s, i, e.Seq)
			}
		}
	}
}

func TestBeginFinish(t *testing.T) {
	m := newManager(t, Options{DefaultQuota: Quota{MaxConcurrent: 2}})
	tn := mustTenant(t, m, "acme")
	if _, err := tn.SaveState("old.json", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.SaveState("kept.json", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	r1, err := tn.Begin("")
	if err != nil {
		t.Fatal(err)
	}
	if ValidateSessionID(r1.Session()) != nil || r1.Tenant() != tn {
		t.Errorf("generated session %q", r1.Session())
	}
	r2, err := tn.Begin("mine")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.Begin("third"); !errors.Is(err, ErrTooManyExecutions) || !errors.Is(err, pluginapi.ErrResourceExhausted) {
		t.Fatalf("third Begin = %v, want ErrTooManyExecutions", err)
	}
	if _, err := tn.Begin("../bad"); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("Begin with a bad session = %v", err)
	}

	// The program writes state directly and through a host call.
	state := filepath.Join(tn.WorkspaceDir(), "state")
	writeFile(t, filepath.Join(state, "new.json"), []byte(`2`))
	writeFile(t, filepath.Join(state, "model.pkl"), []byte(`x`))
	os.Remove(filepath.Join(state, "old.json"))
	if _, err := m.HandleHostCall(t.Context(), "acme", r2.Session(), MethodSaveState, json.RawMessage(`{"name":"via_host.yaml","value":[1]}`)); err != nil {
		t.Fatal(err)
	}
	e, err := r2.Finish(Entry{Code: "work()", Result: &Result{OK: true}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"model.pkl", "new.json", "old.json", "via_host.yaml"}; !slices.Equal(e.StateFiles, want) {
		t.Errorf("StateFiles = %v, want %v", e.StateFiles, want)
	}
	if e.Kind != KindExecution || e.Duration < 0 || e.Seq != 1 {
		t.Errorf("finished entry = %+v", e)
	}
	if _, err := r2.Finish(Entry{}); err == nil {
		t.Error("second Finish succeeded")
	}
	if tn.Running() != 1 {
		t.Errorf("Running = %d, want 1", tn.Running())
	}
	if _, err := tn.Begin("third"); err != nil {
		t.Errorf("Begin after a Finish: %v", err)
	}
	if _, err := r1.Finish(Entry{}); err != nil {
		t.Fatal(err)
	}
	if log, _ := tn.ReadSession("mine"); len(log.Entries) != 1 {
		t.Errorf("session mine has %d entries", len(log.Entries))
	}
}
