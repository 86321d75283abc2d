package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/internal/testutil/pgtest"
)

// replica is one cexecd of a replicated deployment.
type replica struct {
	id   string
	s    setup
	addr string // its MCP face
	d    *daemon
}

// startReplicas starts n cexecd replicas ("a", "b", ...) sharing one
// data_dir and one PostgreSQL store, each with its own control socket and
// MCP port; extra is appended to each one's cexec.hcl.
func startReplicas(t *testing.T, pg *pgtest.Server, n int, extra string) []*replica {
	t.Helper()
	t.Setenv("CEXEC_PG_DSN", pg.DSN)
	t.Setenv("CEXEC_VAULT_KEY", "e2e vault key, not a real secret")
	var data string
	var out []*replica
	for i := range n {
		r := &replica{id: string(rune('a' + i)), s: newSetup(t), addr: mcpFreeAddr(t)}
		b, err := os.ReadFile(r.s.config)
		if err != nil {
			t.Fatal(err)
		}
		cfg := string(b)
		if data == "" {
			data = filepath.Join(r.s.dir, "data")
		} else {
			cfg = strings.Replace(cfg, fmt.Sprintf("%q", filepath.Join(r.s.dir, "data")), fmt.Sprintf("%q", data), 1)
		}
		cfg = strings.Replace(cfg, "cexec {\n", fmt.Sprintf("cexec {\n  replica    = %q\n", r.id), 1)
		cfg += fmt.Sprintf("\nstore {\n  kind      = \"postgres\"\n  dsn       = env(\"CEXEC_PG_DSN\")\n  vault_key = env(\"CEXEC_VAULT_KEY\")\n}\n\nmcp {\n  listen = %q\n}\n", r.addr) + extra
		if err := os.WriteFile(r.s.config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		r.d = startDaemon(t, r.s)
		out = append(out, r)
	}
	return out
}

// startHAProxy runs Debian's haproxy with deploy/haproxy/haproxy.cfg as
// shipped, in front of replicas a and b, and returns its address.
func startHAProxy(t *testing.T, a, b *replica) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/haproxy"); err != nil {
			testutil.SkipMissing(t, "haproxy is not installed (apt-get install haproxy; scripts/deps.sh does)")
		}
	}
	cfg, err := filepath.Abs("../deploy/haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	addr := mcpFreeAddr(t)
	cmd := exec.Command(bin, "-db", "-f", cfg)
	cmd.Env = append(os.Environ(), "CEXEC_LB_BIND="+addr, "CEXEC_REPLICA_A="+a.addr, "CEXEC_REPLICA_B="+b.addr)
	logs := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("haproxy:\n%s", logs)
		}
	})
	for deadline := time.Now().Add(15 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr
		}
		select {
		case <-exited:
			t.Fatalf("haproxy exited: %v\n%s", cmd.ProcessState, logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %s\n%s", addr, logs)
		}
	}
}

// mcpClient initializes an MCP session at url.
func mcpClient(ctx context.Context, t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cexec-e2e-replicas", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize through %s: %v", url, err)
	}
	return c
}

// TestReplicasFailover: two cexecd replicas on one data_dir and one real
// PostgreSQL behind the real HAProxy with the shipped config. A client's
// requests all reach the replica that created its session; concurrent
// versioned increments through both replicas lose nothing; a request sent
// to the wrong live replica gets 421 naming the right one; after the
// client's replica is killed with SIGKILL, the client initializes a new
// session through HAProxy on the other replica and finds its state, its
// skill and its PII tokens there.
func TestReplicasFailover(t *testing.T) {
	pg := pgtest.Start(t)
	rs := startReplicas(t, pg, 2, "")
	for _, r := range rs {
		requireSandbox(t, r.s)
	}
	lb := "http://" + startHAProxy(t, rs[0], rs[1]) + endpoint.MCPPath
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c := mcpClient(ctx, t, lb)
	session := c.GetSessionId()
	owner := rs[0]
	if strings.HasPrefix(session, "b.") {
		owner = rs[1]
	} else if !strings.HasPrefix(session, "a.") {
		t.Fatalf("session id %q carries no replica hint", session)
	}
	other := rs[0]
	if owner == rs[0] {
		other = rs[1]
	}
	t.Logf("session %s on replica %s", session, owner.id)

	// Twelve requests of the session: all served (a replica that did not
	// create the session would answer 421 or 404).
	out := mcpCallText(ctx, t, c, "execute_code", map[string]any{"code": `from cexec import save_state, save_skill
save_state("progress.json", {"page": 7})
save_skill("shout", "Upper-case text", "def shout(s):\n    return s.upper() + '!'\n")
print("mail alice@example.com")
`})
	if !strings.Contains(out, "[EMAIL_1]") || strings.Contains(out, "alice@") {
		t.Fatalf("first execution: %q, want the email as a token", out)
	}
	for i := range 11 {
		if got := mcpCallText(ctx, t, c, "execute_code", map[string]any{"code": fmt.Sprintf("print(%d)", i)}); strings.TrimSpace(got) != fmt.Sprint(i) {
			t.Fatalf("request %d of the session: %q", i+2, got)
		}
	}

	// Versioned read-modify-write through both replicas at once.
	retries := incrementConcurrently(t, 20, rs[0].s, rs[1].s)
	if got := strings.TrimSpace(mustCtl(t, owner.s, "state", "get", "--tenant", "counter", "count.json")); got != "20" {
		t.Fatalf("count.json = %s after 20 increments over two replicas (%d retries), want 20", got, retries)
	}
	t.Logf("20 increments over two replicas, %d retries on StateConflict", retries)
	// Both replicas audited those executions into one chain.
	for _, r := range rs {
		if out := mustCtl(t, r.s, "audit", "verify", "--tenant", "counter"); !strings.Contains(out, "tenant counter: ok") {
			t.Fatalf("audit verify on replica %s after executions on both: %s", r.id, out)
		}
	}

	// Replicas on one data_dir never mount tenant images (both would mount
	// the same one): quotas are measured.
	for _, r := range rs {
		for _, tn := range decode[tenantList](t, must(t, r.s, "", "tenants", "ls", "--json")).Tenants {
			if tn.DiskMode != "measured" {
				t.Fatalf("replica %s: tenant %s is in %q mode, want measured", r.id, tn.ID, tn.DiskMode)
			}
		}
	}

	// The wrong live replica says where the session lives.
	status, body := rawPost(ctx, t, "http://"+other.addr+endpoint.MCPPath, session)
	if status != 421 || !strings.Contains(body, fmt.Sprintf("replica %q", owner.id)) {
		t.Fatalf("the other replica answers %d %q for the session, want 421 naming replica %s", status, body, owner.id)
	}

	// SIGKILL the session's replica; the other's answer for the session is
	// 404 once it sees the owner gone, and a new session through HAProxy
	// lands on it and finds everything.
	if err := owner.d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-owner.d.exited
	for {
		status, body = rawPost(ctx, t, "http://"+other.addr+endpoint.MCPPath, session)
		if status == 404 {
			break
		}
		if status != 421 {
			t.Fatalf("after the kill the survivor answers %d %q", status, body)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the survivor never saw the killed replica's lease lapse")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := c.CallTool(ctx, callReq("execute_code", map[string]any{"code": "print(1)"})); err == nil {
		t.Fatal("the killed replica's session still answers")
	}
	c2 := mcpClient(ctx, t, lb)
	if s2 := c2.GetSessionId(); !strings.HasPrefix(s2, other.id+".") {
		t.Fatalf("new session %s is not the survivor's (%s)", s2, other.id)
	}
	got := mcpCallText(ctx, t, c2, "execute_code", map[string]any{"code": `from cexec import get_state
from skills.shout import shout
print(get_state("progress.json")["page"], shout("found"))
`})
	if strings.TrimSpace(got) != "7 FOUND!" {
		t.Fatalf("after failover: %q, want the state and the skill", got)
	}
	// The old session's tokens: its vault is in PostgreSQL.
	got = mcpCallText(ctx, t, c2, "execute_code", map[string]any{"session": session,
		"code": `print("[EMAIL_1]" == "alice@example.com")`})
	if strings.TrimSpace(got) != "True" {
		t.Fatalf("the old session's token after failover: %q, want it restored", got)
	}
}

func callReq(tool string, args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return req
}

// rawPost sends tools/list in session straight to url and returns the
// status and body.
func rawPost(ctx context.Context, t *testing.T, url, session string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReplicasBench measures execute_code executions per second with one
// replica (its MCP face directly) and with two behind HAProxy (sessions
// spread round robin), the same clients and calls each time, and prints
// both. It asserts only that every call succeeded: speed on a shared
// machine is a figure to read, not to test.
func TestReplicasBench(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark")
	}
	pg := pgtest.Start(t)
	rs := startReplicas(t, pg, 2, "")
	for _, r := range rs {
		requireSandbox(t, r.s)
	}
	lb := startHAProxy(t, rs[0], rs[1])
	type result struct {
		N         int     `json:"n"`
		Clients   int     `json:"clients"`
		PerSecond float64 `json:"executions_per_second"`
		P50Ms     float64 `json:"p50_ms"`
	}
	bench := func(url string) result {
		out := mustCtl(t, rs[0].s, "bench", "mcp", "--json", "--url", url, "--clients", "4", "--n", "50", "--warmup", "5")
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench mcp --json: %v\n%s", err, out)
		}
		if r.N != 200 || r.Clients != 4 || r.PerSecond <= 0 {
			t.Fatalf("bench mcp: %+v", r)
		}
		return r
	}
	one := bench("http://" + rs[0].addr + endpoint.MCPPath)
	two := bench("http://" + lb + endpoint.MCPPath)
	t.Logf("execute_code print(1+1), 4 clients x 50 calls: one replica %.1f executions/s (p50 %.1f ms); two replicas behind HAProxy %.1f executions/s (p50 %.1f ms); %d CPUs",
		one.PerSecond, one.P50Ms, two.PerSecond, two.P50Ms, runtime.NumCPU())
}

// TestReplicasRestartAfterKill: a replica killed with SIGKILL and started
// again at once with its id starts (its connections are going; a running
// replica with that id would be refused), three times over.
func TestReplicasRestartAfterKill(t *testing.T) {
	pg := pgtest.Start(t)
	rs := startReplicas(t, pg, 2, "")
	a := rs[0]
	for i := range 3 {
		if err := a.d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-a.d.exited
		a.d = startDaemon(t, a.s)
		for deadline := time.Now().Add(30 * time.Second); ; {
			if _, _, code := ctl(t, a.s, "status"); code == 0 {
				break
			}
			select {
			case <-a.d.exited:
				t.Fatalf("restart %d after SIGKILL: cexecd exited\n%s", i+1, a.d.stderr)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("restart %d after SIGKILL: not up after 30 s\n%s", i+1, a.d.stderr)
			}
		}
	}
}
