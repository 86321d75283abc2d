package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// incrementProgram is a read-modify-write of count.json that retries on
// StateConflict, as the runtime's docs teach. It prints how many times it
// had to retry.
const incrementProgram = `from cexec import load_state, save_state, StateConflict
retries = 0
while True:
    count, version = load_state("count.json", default=0)
    try:
        save_state("count.json", count + 1, version=version)
        break
    except StateConflict:
        retries += 1
print("retries", retries)
`

// incrementConcurrently runs n increments at once through the cexecctl of
// the given setups (round robin) and returns the total retries.
func incrementConcurrently(t *testing.T, n int, setups ...setup) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		retries int
	)
	for i := range n {
		wg.Add(1)
		go func(s setup) {
			defer wg.Done()
			out, errOut, code, err := run(s, "", "exec", "--tenant", "counter", "-c", incrementProgram)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || code != 0 {
				t.Errorf("increment: exit %d, %v\n%s%s", code, err, out, errOut)
				return
			}
			var r int
			if _, err := fmt.Sscanf(strings.TrimSpace(out), "retries %d", &r); err != nil {
				t.Errorf("increment printed %q", out)
			}
			retries += r
		}(setups[i%len(setups)])
	}
	wg.Wait()
	return retries
}

// TestStateConcurrentIncrements: twenty concurrent read-modify-write
// increments of one state value, each saving with the version it loaded
// and retrying on StateConflict, lose no update with one replica.
func TestStateConcurrentIncrements(t *testing.T) {
	s := newSetup(t)
	appendConfig(t, s, poolFor20)
	startDaemon(t, s)
	requireSandbox(t, s)
	retries := incrementConcurrently(t, 20, s)
	if got := strings.TrimSpace(mustCtl(t, s, "state", "get", "--tenant", "counter", "count.json")); got != "20" {
		t.Fatalf("count.json = %s after 20 increments (%d retries), want 20", got, retries)
	}
	t.Logf("20 increments, %d retries on StateConflict", retries)

	// The control API's compare-and-set, through cexecctl.
	v := strings.TrimSpace(mustCtl(t, s, "state", "version", "--tenant", "counter", "count.json"))
	if out, errOut, code, err := run(s, "21", "state", "put", "--tenant", "counter", "count.json", "--if-version", v); err != nil || code != 0 {
		t.Fatalf("put --if-version with the current version: exit %d %v\n%s%s", code, err, out, errOut)
	}
	out, errOut, code, err := run(s, "22", "state", "put", "--tenant", "counter", "count.json", "--if-version", v)
	if err != nil || code != 1 || !strings.Contains(errOut, "not "+v) {
		t.Fatalf("put --if-version with a stale version: exit %d %v\n%s%s", code, err, out, errOut)
	}
	if got := strings.TrimSpace(mustCtl(t, s, "state", "get", "--tenant", "counter", "count.json")); got != "21" {
		t.Fatalf("count.json = %s after a refused put, want 21", got)
	}
}

// poolFor20 lets twenty executions run at once (the default cap is 16).
const poolFor20 = "\nsandbox {\n  pool {\n    warm      = 1\n    max_total = 24\n  }\n}\n"
