package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// TestReplicasResumeKilledReplicasRuns: a workflow run whose replica is
// killed mid-run is resumed by a surviving replica on its own, without
// `workflow resume` and without waiting for a replica to start: the
// killed replica's hold on the run ends with it, and the survivor learns
// from the store's heartbeats that it went.
func TestReplicasResumeKilledReplicasRuns(t *testing.T) {
	pg := pgtest.Start(t)
	rs := startReplicas(t, pg, 2, "")
	a, b := rs[0], rs[1]
	doc := writeDoc(t, "pause.yaml", `document:
  dsl: '1.0.0'
  namespace: e2e
  name: pause
  version: '1.0.0'
do:
  - pause:
      wait: {seconds: 3}
  - finish:
      set:
        done: true
`)
	run := runDetached(t, a.s, doc)
	// Killed inside the wait: the journal holds the wait's start.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		started := false
		for _, r := range workflowJournal(t, a.s, run) {
			started = started || (r.Kind == "start" && r.Path == "/pause")
		}
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never started its wait on a:\n%s", run, mustCtl(t, a.s, "workflow", "logs", run))
		}
	}
	if err := a.d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.d.exited
	st := waitState(t, b.s, run, "completed")
	if st.State != "completed" {
		t.Fatalf("run %s on b: %s", run, st.State)
	}
	resumed := false
	for _, r := range workflowJournal(t, b.s, run) {
		resumed = resumed || r.Kind == "resume"
	}
	if !resumed {
		t.Errorf("run %s completed without a resume record:\n%s", run, mustCtl(t, b.s, "workflow", "logs", run))
	}
}

// TestReplicasSignalForwarded: a signal or cancel sent on replica b for a
// run that replica a runs reaches a through the store's notifications, and
// b answers with a's result: the run completes with the signal's data, a
// wrong event gets a's error, and a cancel through b cancels the run.
func TestReplicasSignalForwarded(t *testing.T) {
	pg := pgtest.Start(t)
	rs := startReplicas(t, pg, 2, "")
	a, b := rs[0], rs[1]
	doc := writeDoc(t, "ask.yaml", `document:
  dsl: '1.0.0'
  namespace: e2e
  name: ask
  version: '1.0.0'
do:
  - ask:
      listen:
        to:
          one:
            with:
              type: approval
  - finish:
      set:
        approved: ${ .approved }
`)
	start := func() string {
		run := runDetached(t, a.s, doc)
		waitState(t, a.s, run, "waiting")
		return run
	}

	run := start()
	if _, errOut, code := ctl(t, b.s, "workflow", "signal", run, "other"); code != 1 || !strings.Contains(errOut, `does not wait for event "other"`) {
		t.Errorf("wrong event through b: exit %d %s", code, errOut)
	}
	mustCtl(t, b.s, "workflow", "signal", run, "approval", "--data", `{"approved": true}`)
	st := waitState(t, a.s, run, "completed")
	if !strings.Contains(st.OutputJSON, `"approved":true`) {
		t.Errorf("run %s output %s, want approved true", run, st.OutputJSON)
	}
	if _, errOut, code := ctl(t, b.s, "workflow", "signal", run, "approval"); code != 1 || !strings.Contains(errOut, "resume it first") {
		t.Errorf("signal of an ended run through b: exit %d %s", code, errOut)
	}

	big := `"` + strings.Repeat("x", 5000) + `"`
	run = start()
	if _, errOut, code := ctl(t, b.s, "workflow", "signal", run, "approval", "--data", big); code != 1 || !strings.Contains(errOut, "may be at most 3000 bytes") {
		t.Errorf("5000 bytes of data through b: exit %d %s", code, errOut)
	}
	mustCtl(t, b.s, "workflow", "cancel", run)
	if st := waitState(t, a.s, run, "cancelled"); st.State != "cancelled" {
		t.Fatalf("run %s after a cancel through b: %s", run, st.State)
	}
}

// writeDoc writes a workflow document into a temporary folder.
func writeDoc(t *testing.T, name, src string) string {
	t.Helper()
	doc := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(doc, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return doc
}

// runDetached starts a run of doc on s and returns its id.
func runDetached(t *testing.T, s setup, doc string) string {
	t.Helper()
	var st workflowRunJSON
	if err := json.Unmarshal([]byte(mustCtl(t, s, "workflow", "run", "--detach", "--json", doc)), &st); err != nil {
		t.Fatal(err)
	}
	return st.Run
}
