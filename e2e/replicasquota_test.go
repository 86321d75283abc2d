package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// TestReplicasDiskQuota: two cexecd replicas on one data_dir and a real
// PostgreSQL hold tenant acme to one 2 MiB disk_quota together: state
// saves through both at once fit it (each replica alone would have let
// nearly 2 MiB through), and what a program wrote on one replica stops
// the tenant's executions on the other.
func TestReplicasDiskQuota(t *testing.T) {
	const quota, size = 2 << 20, 300 << 10
	pg := pgtest.Start(t)
	rs := startReplicas(t, pg, 2, "\ntenant \"acme\" {\n  disk_quota = \"2MiB\"\n}\n")
	for _, r := range rs {
		requireSandbox(t, r.s)
	}

	value := `"` + strings.Repeat("x", size-2) + `"`
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		saved   int
		refused int
	)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errOut, code, err := run(rs[i%2].s, value, "state", "put", "--tenant", "acme", fmt.Sprintf("s%d.json", i), "-")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && code == 0:
				saved++
			case err == nil && strings.Contains(errOut, "disk quota"):
				refused++
			default:
				t.Errorf("state put s%d.json on replica %s: exit %d %v\n%s", i, rs[i%2].id, code, err, errOut)
			}
		}()
	}
	wg.Wait()
	t.Logf("12 state saves of %d bytes through two replicas into a %d quota: %d saved, %d refused", size, quota, saved, refused)
	if saved*size > quota || saved < quota/size-1 {
		t.Fatalf("%d saves of %d bytes fit a %d quota over two replicas, want %d or %d", saved, size, quota, quota/size-1, quota/size)
	}
	for i := range 12 {
		_, _, _, _ = run(rs[0].s, "", "state", "rm", "--tenant", "acme", fmt.Sprintf("s%d.json", i))
	}

	// A program on replica a writes 3 MiB; once a has measured it (after
	// the execution, off the request path), replica b refuses acme.
	must(t, rs[0].s, "", "exec", "--tenant", "acme", "-c", "open('/workspace/big.bin', 'wb').write(b'x' * (3 << 20))")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, errOut, code, err := run(rs[1].s, "", "exec", "--tenant", "acme", "-c", "print('runs')")
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 && strings.Contains(errOut, `tenant "acme" is over its disk quota`) {
			break
		}
		if code != 0 || out != "runs\n" {
			t.Fatalf("replica b: exit %d %q\n%s", code, out, errOut)
		}
		if time.Now().After(deadline) {
			t.Fatal("replica b still runs acme 30 s after replica a's execution wrote 3 MiB into its 2 MiB quota")
		}
	}
	// Its host writes are refused there too.
	if _, errOut, code, err := run(rs[1].s, `{"more": true}`, "state", "put", "--tenant", "acme", "more.json", "-"); err != nil || code == 0 || !strings.Contains(errOut, "disk quota") {
		t.Fatalf("a state save on replica b while acme is over its quota: exit %d %v\n%s", code, err, errOut)
	}
}
