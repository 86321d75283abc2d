package mcpface

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testutil"
)

// TestTypeScriptClientThroughShim drives the face with the official
// TypeScript SDK client over stdio through a real `cexecctl mcp`, the way
// Claude Desktop or Claude Code would: test/mcp-client/stdio.mjs lists the
// tools, searches, reads a stub, runs a program calling the real
// server-everything, and checks a failing program. Here the face has the
// in-test services; cmd/cexecctl/mcp's end-to-end test runs the same script
// against a real cexecd.
func TestTypeScriptClientThroughShim(t *testing.T) {
	node := peerNode(t)
	root := repoRoot(t)
	script := filepath.Join(root, "test/mcp-client/stdio.mjs")
	if _, err := os.Stat(filepath.Join(root, "test/peers/node_modules/@modelcontextprotocol/sdk/package.json")); err != nil {
		testutil.SkipMissing(t, "the TypeScript SDK is not installed in test/peers (run scripts/deps.sh): %v", err)
	}
	ctl := testutil.BuildBinary(t, "./cmd/cexecctl")

	w := newWorld(t, withUpstream(t))
	dir, err := os.MkdirTemp("", "cexec-ts-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, "cexecd.sock")
	if err := os.WriteFile(control, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := ListenUnix(endpoint.MCPSocket(control))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, w.face, ln)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CEXECCTL="+ctl, "CEXECD_ADDRESS="+control, "MCP_E2E_SERVER=everything")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stdio.mjs: %v\n%s", err, out)
	}
	t.Logf("stdio.mjs: %s", strings.TrimSpace(string(out)))
	if n := w.face.Sessions(); n != 0 {
		t.Errorf("%d sessions left after the client closed", n)
	}
}
