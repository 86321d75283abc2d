package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// TestReplicasOAuthFailover: a tenant signs in to an OAuth-protected
// upstream (the TypeScript SDK's example server with its demo
// authorization server) on the replica serving its MCP session and calls
// it there; that replica is killed with SIGKILL; the client's new session
// through HAProxy lands on the survivor, which calls the upstream with the
// same sign-in: the encrypted token and its key are on the shared
// data_dir, and nobody signs in again.
func TestReplicasOAuthFailover(t *testing.T) {
	url := sdkOAuthServer(t)
	pg := pgtest.Start(t)
	// The same server twice: "sdk" with a sign-in per tenant (an instance
	// per tenant, started when the tenant first calls it), "shared" with one
	// sign-in for every tenant (connected when the replica starts, so the
	// other replica's connection is in its backoff when the sign-in lands).
	rs := startReplicas(t, pg, 2, fmt.Sprintf(`
mcp_server "sdk" {
  url      = %q
  scope    = "tenant"
  optional = true
  oauth {}
}

mcp_server "shared" {
  url      = %q
  optional = true
  oauth {}
}
`, url, url))
	for _, r := range rs {
		requireSandbox(t, r.s)
	}
	lb := "http://" + startHAProxy(t, rs[0], rs[1]) + endpoint.MCPPath
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c := mcpClient(ctx, t, lb)
	owner, other := rs[0], rs[1]
	if strings.HasPrefix(c.GetSessionId(), "b.") {
		owner, other = rs[1], rs[0]
	}
	t.Logf("session %s on replica %s", c.GetSessionId(), owner.id)

	authLogin(t, owner.s, "sdk")
	authLogin(t, owner.s, "shared")
	waitTools(t, owner.s, "sdk")
	// The other replica connects to the shared server with the sign-in
	// made here (told of it through the store), while this one lives.
	waitTools(t, other.s, "shared")
	for _, server := range []string{"sdk", "shared"} {
		want := fmt.Sprintf(`another replica signed in to a server; connecting with its sign-in now: server=%s tenant=default`, server)
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(other.d.stderr.String(), want); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("replica %s was not told of the sign-in to %s (no %q in its log)", other.id, server, want)
			}
		}
	}
	const greet = "from servers.sdk import greet\nfrom servers.shared import greet as greet2\nprint(greet(name='cexec'), greet2(name='cexec'))\n"
	if got := greetUntil(ctx, t, func() (string, error) { return mcpCallTextErr(ctx, c, greet) }); strings.Count(got, "Hello, cexec") != 2 {
		t.Fatalf("on replica %s after its sign-in: %q", owner.id, got)
	}

	if err := owner.d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-owner.d.exited
	// HAProxy's check marks the killed replica down within a second; until
	// then an initialize may still be sent to it.
	c2 := mcpClientRetry(ctx, t, lb)
	var ls struct {
		Logins []struct {
			Server string `json:"server"`
		} `json:"logins"`
	}
	if err := json.Unmarshal([]byte(mustCtl(t, other.s, "auth", "ls", "--json")), &ls); err != nil || len(ls.Logins) != 2 {
		t.Fatalf("the survivor's auth ls: %+v %v, want the two sign-ins made on the killed replica", ls, err)
	}
	if s2 := c2.GetSessionId(); !strings.HasPrefix(s2, other.id+".") {
		t.Fatalf("new session %s is not the survivor's (%s)", s2, other.id)
	}
	got := greetUntil(ctx, t, func() (string, error) { return mcpCallTextErr(ctx, c2, greet) })
	if strings.Count(got, "Hello, cexec") != 2 {
		t.Fatalf("on the survivor %s with the killed replica's sign-in: %q", other.id, got)
	}
}

// greetUntil calls fn until its output holds both greetings or 30 s pass, and
// returns the last output (or error text).
func greetUntil(ctx context.Context, t *testing.T, fn func() (string, error)) string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, err := fn()
		if err != nil {
			out = "error: " + err.Error()
		}
		if strings.Count(out, "Hello, cexec") == 2 {
			return out
		}
		if out != last {
			t.Logf("not yet: %s", out)
			last = out
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return out
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// mcpCallTextErr runs code with execute_code and returns its text; a tool
// error's text comes back as an error.
func mcpCallTextErr(ctx context.Context, c *client.Client, code string) (string, error) {
	res, err := c.CallTool(ctx, callReq("execute_code", map[string]any{"code": code}))
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", errors.New(mcpText(res))
	}
	return mcpText(res), nil
}

// mcpClientRetry initializes an MCP session at url, retrying for 30 s
// while the balancer may still pick a replica that just died.
func mcpClientRetry(ctx context.Context, t *testing.T, url string) *client.Client {
	t.Helper()
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		c, err := client.NewStreamableHttpClient(url)
		if err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		init.Params.ClientInfo = mcp.Implementation{Name: "cexec-e2e-replicas", Version: "1"}
		if err = c.Start(ctx); err == nil {
			if _, err = c.Initialize(ctx, init); err == nil {
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
		}
		_ = c.Close()
		last = err
	}
	t.Fatalf("initialize through %s after the kill: %v", url, last)
	return nil
}
