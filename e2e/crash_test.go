package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// crashLog is what the writers of TestWorkspaceCrash got acknowledged.
type crashLog struct {
	mu sync.Mutex
	// puts maps a state file to the bytes a successful `state put` wrote.
	puts map[string]string
	// hotAcked and hotTried are, per writer, the last value of its hot
	// file that a put acknowledged and the last one it attempted.
	hotAcked, hotTried [2]int
	// execs maps a session to the indexes of executions that returned
	// their result.
	execs map[string][]int
	// steps are the checkpoints `sessions checkpoint` acknowledged.
	steps []int
	// unexpected are failures before the kill.
	unexpected []string
}

func (l *crashLog) fail(killed *atomic.Bool, what, out, errOut string, code int, err error) {
	if killed.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unexpected = append(l.unexpected, fmt.Sprintf("%s: exit %d %v\n%s%s", what, code, err, out, errOut))
}

func (l *crashLog) counts() (puts, execs, steps int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.execs {
		execs += len(e)
	}
	return len(l.puts), execs, len(l.steps)
}

// TestWorkspaceCrash is issue 7's crash test at the daemon level: state
// puts, executions that save state and make checkpoints, and checkpoints
// through the API run concurrently until cexecd is killed with SIGKILL in
// the middle of them. After a restart every acknowledged write must be
// there, intact, and the session logs readable up to at most a torn last
// line, which the next append repairs.
// It is long because the writers, the kill and the checks after the
// restart are one scenario over the same acknowledged writes.
func TestWorkspaceCrash(t *testing.T) {
	s := workspaceSetup(t)
	d := startDaemon(t, s)
	requireSandbox(t, s)
	var pluginPIDs []int
	for _, p := range listPlugins(t, s) {
		pluginPIDs = append(pluginPIDs, p.PID)
	}

	l := &crashLog{puts: map[string]string{}, execs: map[string][]int{}, hotAcked: [2]int{-1, -1}, hotTried: [2]int{-1, -1}}
	var killed atomic.Bool
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := 0; !killed.Load(); i++ {
				name := fmt.Sprintf("w%d-%04d.json", g, i)
				data := fmt.Sprintf(`{"writer":%d,"i":%d,"pad":%q}`, g, i, strings.Repeat("p", 1000+37*i))
				out, errOut, code, err := run(s, data, "state", "put", name, "-")
				if err != nil || code != 0 {
					l.fail(&killed, "put "+name, out, errOut, code, err)
					return
				}
				l.mu.Lock()
				l.puts[name] = data
				l.hotTried[g] = i
				l.mu.Unlock()
				out, errOut, code, err = run(s, fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("h", 20000)), "state", "put", fmt.Sprintf("hot%d.json", g), "-")
				if err != nil || code != 0 {
					l.fail(&killed, "put hot", out, errOut, code, err)
					return
				}
				l.mu.Lock()
				l.hotAcked[g] = i
				l.mu.Unlock()
			}
		})
	}
	for _, session := range []string{"crash-a", "crash-b"} {
		wg.Go(func() {
			for i := 0; !killed.Load(); i++ {
				code := fmt.Sprintf(`import cexec
cexec.save_state("%s-%04d.json", {"i": %d, "blob": "b" * 50000})
cexec.checkpoint("step %d", {"i": %d, "pad": "c" * 20000})
cexec.save_state("%s-last.yaml", {"i": %d})
print("done %d")
`, session, i, i, i, i, session, i, i)
				out, errOut, rc, err := run(s, "", "exec", "--session", session, "-c", code)
				if err != nil || rc != 0 || out != fmt.Sprintf("done %d\n", i) {
					l.fail(&killed, "exec in "+session, out, errOut, rc, err)
					return
				}
				l.mu.Lock()
				l.execs[session] = append(l.execs[session], i)
				l.mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for i := 0; !killed.Load(); i++ {
			out, errOut, code, err := run(s, "", "sessions", "checkpoint", "crash-api", fmt.Sprintf("api %d", i), "--context", fmt.Sprintf(`{"i":%d}`, i))
			if err != nil || code != 0 {
				l.fail(&killed, "sessions checkpoint", out, errOut, code, err)
				return
			}
			l.mu.Lock()
			l.steps = append(l.steps, i)
			l.mu.Unlock()
		}
	})

	// Kill once every kind of write has been acknowledged a few times, in
	// the middle of the next ones.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		puts, execs, steps := l.counts()
		if puts >= 40 && execs >= 6 && steps >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("after 3 minutes only %d puts, %d execs and %d checkpoints were acknowledged; killing now", puts, execs, steps)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(120 * time.Millisecond)
	killed.Store(true)
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	wg.Wait()
	// Plugins outlive a killed host only until they notice; make sure none
	// is left (each was checked to still be one of ours).
	left := 0
	for _, pid := range pluginPIDs {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(b, []byte("cexec-plugin-")) {
			left++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	t.Logf("%d of %d plugin processes outlived the killed daemon", left, len(pluginPIDs))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.unexpected) > 0 {
		t.Fatalf("writes failed before the kill:\n%s", strings.Join(l.unexpected, "\n"))
	}
	nExecs := len(l.execs["crash-a"]) + len(l.execs["crash-b"])
	t.Logf("SIGKILL after %d acknowledged puts, %d executions and %d API checkpoints", len(l.puts), nExecs, len(l.steps))
	if len(l.puts) == 0 || nExecs == 0 || len(l.steps) == 0 {
		t.Fatal("some kind of write was never acknowledged before the kill; nothing to check")
	}

	startDaemon(t, s)

	// Every acknowledged put, byte for byte.
	for name, data := range l.puts {
		if got := must(t, s, "", "state", "get", name); got != data+"\n" {
			t.Errorf("state %s after the crash: %.80q, want %.80q", name, got, data)
		}
	}
	// Overwritten files hold the last acknowledged value or the one in
	// flight, whole.
	for g := range 2 {
		var hot struct{ I int }
		if err := json.Unmarshal([]byte(must(t, s, "", "state", "get", fmt.Sprintf("hot%d.json", g), "--json")), &hot); err != nil {
			t.Errorf("hot%d.json: %v", g, err)
		} else if hot.I != l.hotAcked[g] && hot.I != l.hotTried[g] {
			t.Errorf("hot%d.json holds %d; acknowledged %d, last tried %d", g, hot.I, l.hotAcked[g], l.hotTried[g])
		}
	}

	for session, acked := range l.execs {
		show := decode[sessionShow](t, must(t, s, "", "sessions", "show", session, "--json"))
		checkSeqs(t, session, show)
		t.Logf("session %s: %d executions acknowledged, %d entries logged, %d torn line(s)", session, len(acked), len(show.Entries), show.Skipped)
		steps, done := map[string]bool{}, map[string]bool{}
		for _, e := range show.Entries {
			switch {
			case e.Kind == "checkpoint":
				steps[e.Step] = true
			case e.Kind == "execution" && e.Result != nil && e.Result.OK:
				done[e.Result.Output] = true
			}
		}
		for _, i := range acked {
			if !steps[fmt.Sprintf("step %d", i)] || !done[fmt.Sprintf("done %d\n", i)] {
				t.Errorf("session %s lost acknowledged execution %d (checkpoint %v, execution %v)", session, i, steps[fmt.Sprintf("step %d", i)], done[fmt.Sprintf("done %d\n", i)])
			}
		}
		// The state those executions saved, checked inside the sandbox.
		code := fmt.Sprintf(`import cexec
bad = []
for i in %s:
    v = cexec.get_state("%s-%%04d.json" %% i)
    if v["i"] != i or v["blob"] != "b" * 50000:
        bad.append(i)
last = cexec.get_state("%s-last.yaml")["i"]
print(bad, last >= %d)
`, pyList(acked), session, session, acked[len(acked)-1])
		if out := must(t, s, "", "exec", "-c", code); out != "[] True\n" {
			t.Errorf("state saved by %s's acknowledged executions: %q", session, out)
		}
	}
	api := decode[sessionShow](t, must(t, s, "", "sessions", "show", "crash-api", "--json"))
	checkSeqs(t, "crash-api", api)
	have := map[string]bool{}
	for _, e := range api.Entries {
		have[e.Step+" "+compact(e.Context)] = true
	}
	for _, i := range l.steps {
		if !have[fmt.Sprintf(`api %d {"i":%d}`, i, i)] {
			t.Errorf("acknowledged API checkpoint %d is missing", i)
		}
	}

	// The next append repairs a torn tail: the log reads cleanly again.
	for _, session := range []string{"crash-a", "crash-b", "crash-api"} {
		before := decode[sessionShow](t, must(t, s, "", "sessions", "show", session, "--json"))
		must(t, s, "", "sessions", "checkpoint", session, "after restart")
		after := decode[sessionShow](t, must(t, s, "", "sessions", "show", session, "--json"))
		checkSeqs(t, session, after)
		if after.Skipped != 0 || len(after.Entries) != len(before.Entries)+1 || after.Entries[len(after.Entries)-1].Step != "after restart" {
			t.Errorf("session %s after an append past the crash: %d entries (was %d), %d skipped", session, len(after.Entries), len(before.Entries), after.Skipped)
		}
	}
}

// checkSeqs checks that a session log's entries are numbered 1, 2, 3, ...
// with nothing lost in between and at most a torn last line skipped.
func checkSeqs(t *testing.T, session string, show sessionShow) {
	t.Helper()
	if show.Skipped > 1 {
		t.Errorf("session %s: %d damaged lines; a crash may tear only the last", session, show.Skipped)
	}
	for i, e := range show.Entries {
		if e.Seq != int64(i+1) {
			t.Errorf("session %s: entry %d has seq %d; earlier lines were lost or damaged", session, i+1, e.Seq)
			return
		}
	}
}

func pyList(xs []int) string {
	b, _ := json.Marshal(xs)
	return string(b)
}
