package workspace

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test runs a writer in a child process (this test binary,
// re-executed into TestHelperProcess), lets it save state and append to
// session logs from several goroutines as fast as it can, printing one line
// per acknowledged write, and kills it with SIGKILL mid-way. Then a fresh
// Manager opens the data dir and every acknowledged write must be intact:
// this is the library-level version of killing cexecd during heavy writes.

const helperEnv = "CEXEC_WORKSPACE_CRASH_HELPER"

// TestHelperProcess is the writer; it does nothing in a normal test run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process for TestCrashKill")
	}
	dataDir, round := os.Getenv("CEXEC_CRASH_DATA"), os.Getenv("CEXEC_CRASH_ROUND")
	m, err := New(Options{DataDir: dataDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tn, err := m.Tenant("acme")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	ack := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		// One write per line, so the parent never reads half an ack.
		os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	pad := func(r *rand.Rand, min, max int) string { return strings.Repeat("x", min+r.IntN(max-min)) }
	writers := []func(r *rand.Rand, i int){
		func(r *rand.Rand, i int) { // new state files
			name := fmt.Sprintf("r%s-k%d.json", round, i)
			v := mustJSON(map[string]any{"round": round, "i": i, "pad": pad(r, 20<<10, 120<<10)})
			if _, err := tn.SaveState(name, v); err != nil {
				fail(err)
			}
			sum := sha256.Sum256(v)
			ack("state %s %s", name, hex.EncodeToString(sum[:]))
		},
		func(r *rand.Rand, i int) { // one state file, overwritten again and again
			v := mustJSON(map[string]any{"round": round, "i": i, "pad": pad(r, 10<<10, 100<<10)})
			if _, err := tn.SaveState("counter.yaml", v); err != nil {
				fail(err)
			}
			ack("counter %s %d", round, i)
		},
		func(r *rand.Rand, i int) { // a session that spans every run
			e, err := tn.Append("shared", Entry{Kind: KindExecution, Code: strconv.Itoa(i),
				Result: &Result{OK: true, Output: pad(r, 1<<10, 60<<10)}})
			if err != nil {
				fail(err)
			}
			ack("log shared %d %d", e.Seq, i)
		},
		func(r *rand.Rand, i int) { // this run's own session, with checkpoints
			session := "run-" + round
			var e Entry
			var err error
			if i%4 == 3 {
				e, err = tn.Checkpoint(session, "step-"+strconv.Itoa(i), mustJSON(map[string]any{"i": i, "pad": pad(r, 100, 30<<10)}))
			} else {
				e, err = tn.Append(session, Entry{Kind: KindExecution, Code: strconv.Itoa(i), Task: pad(r, 10, 40<<10)})
			}
			if err != nil {
				fail(err)
			}
			ack("log %s %d %d", session, e.Seq, i)
		},
	}
	var wg sync.WaitGroup
	for w, write := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; ; i++ {
				write(r, i)
			}
		}()
	}
	wg.Wait()
}

type crashAcks struct {
	states  map[string]string // name -> sha256 of the value
	counter [2]int            // round, i of the last acknowledged counter.yaml
	logs    map[string]map[int64]string
}

func TestCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a writer process")
	}
	dataDir := t.TempDir()
	acks := crashAcks{states: map[string]string{}, counter: [2]int{-1, -1}, logs: map[string]map[int64]string{}}
	for round := range 3 {
		n := runAndKill(t, dataDir, round, &acks)
		t.Logf("round %d: killed after %d acknowledged writes", round, n)
		verifyAfterCrash(t, dataDir, &acks)
	}
}

// runAndKill starts the writer, waits for some acknowledgements, kills it
// at a random moment and records every acknowledgement it printed.
func runAndKill(t *testing.T, dataDir string, round int, acks *crashAcks) int {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "CEXEC_CRASH_DATA="+dataDir, "CEXEC_CRASH_ROUND="+strconv.Itoa(round))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	target := 100 + rand.IntN(200)
	killAt := time.After(30 * time.Second) // a slow machine still gets killed
	count := 0
	killed := false
	for line := range lines {
		if strings.HasPrefix(line, "state ") || strings.HasPrefix(line, "counter ") || strings.HasPrefix(line, "log ") {
			count++
			recordAck(t, line, acks)
		}
		if !killed && count >= target {
			time.Sleep(time.Duration(rand.IntN(5000)) * time.Microsecond)
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
		select {
		case <-killAt:
			if !killed {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		default:
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("writer ended with %v, not by SIGKILL; stderr:\n%s", err, stderr.String())
	}
	return count
}

func recordAck(t *testing.T, line string, acks *crashAcks) {
	f := strings.Fields(line)
	switch f[0] {
	case "state":
		acks.states[f[1]] = f[2]
	case "counter":
		r, _ := strconv.Atoi(f[1])
		i, _ := strconv.Atoi(f[2])
		if r > acks.counter[0] || (r == acks.counter[0] && i > acks.counter[1]) {
			acks.counter = [2]int{r, i}
		}
	case "log":
		seq, _ := strconv.ParseInt(f[2], 10, 64)
		if acks.logs[f[1]] == nil {
			acks.logs[f[1]] = map[int64]string{}
		}
		acks.logs[f[1]][seq] = f[3]
	default:
		t.Fatalf("unknown ack %q", line)
	}
}

func verifyAfterCrash(t *testing.T, dataDir string, acks *crashAcks) {
	t.Helper()
	// What the kill interrupted, for the log: half-written temporary files.
	var temps int
	for _, dir := range []string{"workspace/state", "sessions"} {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "tenants", "acme", dir))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				temps++
			}
		}
	}
	torn := 0
	defer func() { t.Logf("  interrupted: %d temporary files, %d torn log lines", temps, torn) }()
	m := newManager(t, Options{DataDir: dataDir})
	tn := mustTenant(t, m, "acme")

	for name, sum := range acks.states {
		v, err := tn.GetStateFile(name)
		if err != nil {
			t.Fatalf("acknowledged state %s lost: %v", name, err)
		}
		if got := sha256.Sum256(v); hex.EncodeToString(got[:]) != sum {
			t.Fatalf("acknowledged state %s changed", name)
		}
	}
	if acks.counter[0] >= 0 {
		v, err := tn.GetState("counter.yaml")
		if err != nil {
			t.Fatalf("counter.yaml unreadable after the crash: %v", err)
		}
		var c struct {
			Round string `json:"round"`
			I     int    `json:"i"`
		}
		if err := json.Unmarshal(v, &c); err != nil {
			t.Fatal(err)
		}
		r, _ := strconv.Atoi(c.Round)
		if r < acks.counter[0] || (r == acks.counter[0] && c.I < acks.counter[1]) {
			t.Fatalf("counter.yaml holds round %d write %d, older than the acknowledged %v", r, c.I, acks.counter)
		}
	}
	// Interrupted writes leave nothing behind once the tenant is opened.
	for _, dir := range []string{filepath.Join(tn.WorkspaceDir(), "state"), filepath.Join(tn.dir, "sessions")} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("leftover %s in %s", e.Name(), dir)
			}
		}
	}

	list, err := tn.ListSessions()
	if err != nil {
		t.Fatal(err)
	}
	infos := map[string]SessionInfo{}
	for _, s := range list {
		infos[s.ID] = s
	}
	for session, want := range acks.logs {
		log, err := tn.ReadSession(session)
		if err != nil {
			t.Fatalf("session %s: %v", session, err)
		}
		for _, p := range log.Problems {
			torn++
			if !p.Torn || p.Line != int64(len(log.Entries))+1 {
				t.Fatalf("session %s: damaged line other than a torn last one: %+v", session, p)
			}
		}
		for i, e := range log.Entries {
			if e.Seq != int64(i+1) {
				t.Fatalf("session %s: entry %d has seq %d", session, i+1, e.Seq)
			}
		}
		for seq, code := range want {
			if seq > int64(len(log.Entries)) {
				t.Fatalf("session %s: acknowledged entry %d lost (%d entries)", session, seq, len(log.Entries))
			}
			e := log.Entries[seq-1]
			if got := e.Code; e.Kind == KindCheckpoint && e.Step != "step-"+code || e.Kind != KindCheckpoint && got != code {
				t.Fatalf("session %s: entry %d is %+v, acknowledged write %s", session, seq, e, code)
			}
		}
		if infos[session].Entries != int64(len(log.Entries)) {
			t.Fatalf("session %s: summary says %d entries, log has %d", session, infos[session].Entries, len(log.Entries))
		}
		if _, err := tn.Resume(session); err != nil {
			t.Fatalf("Resume(%s): %v", session, err)
		}
	}
	m.Close()
}
