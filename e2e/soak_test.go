package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// TestSoakSmall runs the soak and chaos harness of `make soak` (e2e/soak)
// at a small size, so that it cannot rot: 300 executions across 4 tenants
// with every plugin, the upstream and finally cexecd SIGKILLed along the
// way. No acknowledged state write may be lost, no raw PII may reach a
// reply, every failure must be a clear error, and the daemon's memory,
// descriptors and goroutines must stay within the harness's bounds.
func TestSoakSmall(t *testing.T) {
	nm := mcpPeers(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		testutil.SkipMissing(t, "bubblewrap is not installed (run scripts/deps.sh): %v", err)
	}
	if len(bins.plugins) < 4 {
		t.Skipf("the soak run needs the four default plugins; %d were built", len(bins.plugins))
	}
	harness := testutil.BuildBinary(t, "./e2e/soak")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness, "-n", "300", "-tenants", "4", "-concurrency", "4", "-chaos", "-json",
		"-cexecd", filepath.Join(bins.dir, "cexecd"), "-plugin-dir", bins.pluginDir, "-peers", nm)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
		t.Fatalf("soak harness: %v\n%s", err, stderr.String())
	}
	var rep struct {
		OK, Failed, Lost int
		Acked            int `json:"acked_writes"`
		RawPII           int `json:"raw_pii"`
		Unclear          map[string]int
		Errors           map[string]int
		Events           []struct{ Target string }
		Checks           []struct {
			Name, Detail string
			OK           bool
		}
		Passed bool
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("soak report: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("%s: %s", c.Name, c.Detail)
		}
	}
	if len(rep.Events) != 6 || rep.Acked == 0 || !rep.Passed {
		t.Errorf("%d SIGKILLs, %d acknowledged writes, passed %v; want 6 kills, some writes and a pass", len(rep.Events), rep.Acked, rep.Passed)
	}
	t.Logf("soak: %d ok, %d failed, %d writes acknowledged and %d lost, %d replies with raw PII; failures by kind: %v",
		rep.OK, rep.Failed, rep.Acked, rep.Lost, rep.RawPII, rep.Errors)
	if t.Failed() {
		t.Logf("harness log:\n%s", stderr.String())
	}
}
