package mcpface

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// ConformanceURLEnv, when set, points TestConformance at a running MCP
// endpoint (e.g. a real cexecd: http://127.0.0.1:7797/mcp) instead of a
// face with in-test services. The endpoint must be on a loopback address
// without tokens: the suite sends no credentials, and its DNS rebinding
// scenario needs a localhost URL.
const ConformanceURLEnv = "CEXEC_CONFORMANCE_URL"

// TestConformance runs the official MCP conformance suite against the
// face's streamable HTTP endpoint. Failures listed (and justified) in
// testdata/conformance-baseline.yml are expected; any other failure, or a
// listed scenario that passes, fails the test.
func TestConformance(t *testing.T) {
	node := peerNode(t)
	cli := filepath.Join(repoRoot(t), "test/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js")
	if _, err := os.Stat(cli); err != nil {
		testutil.SkipMissing(t, "the conformance suite is not installed in test/peers (run scripts/deps.sh): %v", err)
	}
	baseline, err := filepath.Abs("testdata/conformance-baseline.yml")
	if err != nil {
		t.Fatal(err)
	}
	url := os.Getenv(ConformanceURLEnv)
	if url == "" {
		url = newWorld(t).url + "/mcp"
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url, "--expected-failures", baseline, "--output-dir", out)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	output, err := cmd.CombinedOutput()

	passed, failed := readConformance(t, out)
	t.Logf("conformance against %s: %d scenarios passed %v, %d failed (see the baseline for why)", url, len(passed), passed, len(failed))
	if err != nil {
		t.Errorf("conformance suite: %v\n%s", err, tail(string(output), 4000))
	}
	if len(passed)+len(failed) == 0 {
		t.Errorf("the suite wrote no results\n%s", tail(string(output), 4000))
	}
}

// conformanceCheck is one check in a scenario's checks.json.
type conformanceCheck struct {
	Status string `json:"status"`
}

// readConformance reads the scenario results the CLI wrote.
func readConformance(t *testing.T, dir string) (passed, failed []string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "server-*", "checks.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(filepath.Dir(f))
		name = strings.TrimPrefix(name[:len(name)-len("-2006-01-02T15-04-05-000Z")], "server-")
		ok := len(checks) > 0 && !slices.ContainsFunc(checks, func(c conformanceCheck) bool {
			return c.Status != "SUCCESS" && c.Status != "INFO"
		})
		if ok {
			passed = append(passed, name)
		} else {
			failed = append(failed, name)
		}
	}
	slices.Sort(passed)
	return passed, failed
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
