package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
)

// pii is the customer record the guardrail tests read through the real
// filesystem server: one value of each configured type, as written in the
// file, with the other spellings a leak could take.
var pii = []struct {
	field, typ, value string
	variants          []string
}{
	{"Email", "EMAIL", "jane.roe@example.com", []string{"JANE.ROE@EXAMPLE.COM"}},
	{"Phone", "PHONE", "+1 650-253-0000", []string{"16502530000", "650-253-0000", "6502530000"}},
	{"Card", "CREDIT_CARD", "4111 1111 1111 1111", []string{"4111111111111111", "4111-1111-1111-1111"}},
	{"IBAN", "IBAN", "DE89 3704 0044 0532 0130 00", []string{"DE89370400440532013000"}},
	{"SSN", "US_SSN", "536-22-1847", []string{"536221847", "536 22 1847"}},
}

const customerFile = "Customer record\nName: J. Roe\nEmail: jane.roe@example.com\nPhone: +1 650-253-0000\n" +
	"Card: 4111 1111 1111 1111\nIBAN: DE89 3704 0044 0532 0130 00\nSSN: 536-22-1847\n"

// guardEnv is a daemon setup with the sandbox, the PII guard, the real
// filesystem server over files and the tenants of the test.
type guardEnv struct {
	setup
	files string
}

// guardCommand names the guard plugin's binary; tenants are extra blocks.
func newGuardEnv(t *testing.T, guardCommand, tenants string) guardEnv {
	t.Helper()
	fsServer := testpeers.Bin(t, "mcp-server-filesystem")
	if _, err := exec.LookPath("node"); err != nil {
		testutil.SkipMissing(t, "node is not installed; run scripts/deps.sh")
	}
	for _, p := range []string{"cexec-plugin-sandbox-bwrap", "cexec-plugin-guard-pii"} {
		if _, err := os.Stat(filepath.Join(bins.pluginDir, p)); err != nil {
			testutil.SkipMissing(t, "%s was not built: %v", p, err)
		}
	}
	if b, err := exec.Command("bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "/bin/true").CombinedOutput(); err != nil {
		testutil.SkipMissing(t, "bubblewrap cannot make a sandbox on this machine: %v %s", err, b)
	}
	dir, err := os.MkdirTemp("", "cexec-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := guardEnv{
		setup: setup{dir: dir, sock: filepath.Join(dir, "run", "cexecd.sock"), config: filepath.Join(dir, "cexec.hcl")},
		files: filepath.Join(dir, "files"),
	}
	if err := os.MkdirAll(filepath.Join(e.files, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.files, "customer.txt"), []byte(customerFile), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`cexec {
  data_dir   = %q
  socket     = %q
  plugin_dir = %q
  log_level  = "debug"
}

plugin "sandbox" "bwrap" {}

plugin "guard" "pii" {
  command = %q
}

sandbox {
  pool {
    warm = 1
  }
}

mcp_server "filesystem" {
  command = %q
  args    = [%q]
}
%s`, filepath.Join(dir, "data"), e.sock, bins.pluginDir, guardCommand, fsServer, e.files, tenants)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// mcpSession opens an MCP session with the daemon's face on its private
// unix socket, as tenant.
func mcpSession(t *testing.T, s setup, tenant string) *client.Client {
	t.Helper()
	sock := endpoint.MCPSocket(s.sock)
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("cexecd serves no MCP socket at %s: %v", sock, err)
	}
	c, err := client.NewStreamableHttpClient(endpoint.UnixBaseURL+endpoint.MCPPath,
		transport.WithHTTPHeaders(map[string]string{endpoint.TenantHeader: tenant}),
		transport.WithHTTPBasicClient(endpoint.UnixClient(sock)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cexec-e2e-guard", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// toolStat is one tool's line of execute_code's tool call summary.
type toolStat struct {
	Server string `json:"server"`
}

// modelReply is what an agent got back from execute_code: all of it, as
// the model reads it.
type modelReply struct {
	text    string
	raw     string // the whole result as JSON, structuredContent included
	isError bool
	out     struct {
		Stdout string          `json:"stdout"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		ToolCalls struct {
			Tools []toolStat `json:"tools"`
		} `json:"tool_calls"`
		Session string `json:"session"`
	}
}

func executeCode(t *testing.T, c *client.Client, code, session string) modelReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "execute_code"
	args := map[string]any{"code": code}
	if session != "" {
		args["session"] = session
	}
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("execute_code: %v", err)
	}
	var r modelReply
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			r.text += tc.Text
		}
	}
	r.isError = res.IsError
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	r.raw = string(raw)
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r.out); err != nil {
			t.Fatalf("structuredContent: %v\n%s", err, b)
		}
	}
	return r
}

// assertNoPII fails for every raw value, in any spelling, found in what.
func assertNoPII(t *testing.T, where, what string) {
	t.Helper()
	for _, p := range pii {
		for _, v := range append([]string{p.value}, p.variants...) {
			if strings.Contains(what, v) {
				t.Errorf("%s shows the raw %s %q:\n%s", where, p.typ, v, what)
			}
		}
	}
}

var tokenRE = regexp.MustCompile(`^\[([A-Z_]+)_([0-9]+)\]$`)

// TestGuardRoundTrip is issue 9's round trip: PII read through the real
// filesystem server reaches the model only as tokens; code the model
// writes with those tokens writes the real values; the tokens hold across
// executions and a guard plugin crash, and another MCP session of the
// tenant cannot restore them, not even by naming the session.
// It is long because the round trip is one session whose tokens must hold
// across each step, the plugin crash included.
func TestGuardRoundTrip(t *testing.T) {
	e := newGuardEnv(t, "cexec-plugin-guard-pii", "")
	startDaemon(t, e.setup)

	read := fmt.Sprintf(`from servers.filesystem import read_text_file
import cexec
text = read_text_file(path=%q)["content"]
print(text)
cexec.result(dict(line.split(": ", 1) for line in text.splitlines() if ": " in line))
`, filepath.Join(e.files, "customer.txt"))
	c1 := mcpSession(t, e.setup, "default")
	first := executeCode(t, c1, read, "")
	if first.isError || first.out.Error != nil {
		t.Fatalf("reading the record failed:\n%s", first.text)
	}
	assertNoPII(t, "the first model-facing reply", first.raw)
	// The reply names no session: it ran in the connection's own, whose id
	// is the MCP session's.
	session := c1.GetSessionId()
	if first.out.Session != "" || session == "" {
		t.Fatalf("reply session %q, MCP session %q: want the connection's own, unnamed", first.out.Session, session)
	}
	var fields map[string]string
	if err := json.Unmarshal(first.out.Result, &fields); err != nil {
		t.Fatalf("result: %v\n%s", err, first.out.Result)
	}
	tokens := map[string]string{} // field → token
	for _, p := range pii {
		tok := fields[p.field]
		m := tokenRE.FindStringSubmatch(tok)
		if m == nil || m[1] != p.typ {
			t.Errorf("%s came back as %q, want a %s token", p.field, tok, p.typ)
			continue
		}
		tokens[p.field] = tok
		if !strings.Contains(first.out.Stdout, p.field+": "+tok) {
			t.Errorf("stdout does not show %s as %s:\n%s", p.field, tok, first.out.Stdout)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("session %s: the model saw %v", session, tokens)

	data := filepath.Join(e.dir, "data", "tenants", "default")
	logFile := filepath.Join(data, "sessions", session+".jsonl")
	if b, err := os.ReadFile(logFile); err != nil {
		t.Errorf("session log: %v", err)
	} else {
		assertNoPII(t, "the session log", string(b))
	}
	vaultFile := filepath.Join(data, "vaults", session+".json")
	if fi, err := os.Stat(vaultFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("vault %s: %v, mode %v; want a 0600 file", vaultFile, err, fi)
	}

	// The vault survives a crash of the guard plugin.
	before := listPlugins(t, e.setup)["guard/pii"]
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, e.setup, "guard/pii", before)

	// The session writes the record back with the tokens it was shown.
	var content strings.Builder
	for _, p := range pii {
		fmt.Fprintf(&content, "%s: %s\n", p.field, tokens[p.field])
	}
	copyPath := filepath.Join(e.files, "out", "copy.txt")
	// The second file's content is a token built at run time, so only
	// call_tool's arguments can restore it, not the code's literals.
	builtPath := filepath.Join(e.files, "out", "built.txt")
	write := fmt.Sprintf(`from servers.filesystem import write_file, read_text_file
write_file(path=%q, content=%q)
write_file(path=%q, content="".join(["[", %q, "]"]))
print(read_text_file(path=%q)["content"], end="")
`, copyPath, content.String(), builtPath, strings.Trim(tokens["Email"], "[]"), copyPath)
	second := executeCode(t, c1, write, session)
	if second.isError || second.out.Error != nil {
		t.Fatalf("writing with tokens failed:\n%s", second.text)
	}
	assertNoPII(t, "the second model-facing reply", second.raw)
	if second.out.Stdout != content.String() {
		t.Errorf("the written record read back as\n%s\nwant the same tokens:\n%s", second.out.Stdout, content.String())
	}
	got, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, p := range pii {
		fmt.Fprintf(&want, "%s: %s\n", p.field, p.value)
	}
	if string(got) != want.String() {
		t.Errorf("file on disk:\n%s\nwant the real values:\n%s", got, want.String())
	}
	if got, err := os.ReadFile(builtPath); err != nil || string(got) != pii[0].value {
		t.Errorf("file written with a token built at run time: %q, %v; want %q", got, err, pii[0].value)
	}

	// Error texts are model-facing too, and keep the session's tokens; so
	// are the names a program gives a server it calls and an exception.
	fail := fmt.Sprintf(`from servers.filesystem import read_text_file
from cexec import call_tool
text = read_text_file(path=%q)["content"]
email = [l for l in text.splitlines() if l.startswith("Email: ")][0][7:]
try:
    call_tool(email, email, {})
except Exception:
    pass
raise ValueError("cannot reach " + email)
`, filepath.Join(e.files, "customer.txt"))
	third := executeCode(t, c1, fail, session)
	assertNoPII(t, "the failed execution's reply", third.raw)
	if third.out.Error == nil || third.out.Error.Message != "cannot reach "+tokens["Email"] {
		t.Errorf("error = %+v, want ValueError naming %s\n%s", third.out.Error, tokens["Email"], third.text)
	}
	if tools := third.out.ToolCalls.Tools; len(tools) != 2 || !slices.ContainsFunc(tools, func(c toolStat) bool { return c.Server == tokens["Email"] }) {
		t.Errorf("tool calls = %+v, want filesystem's and one to the server named %s", third.out.ToolCalls, tokens["Email"])
	}
	class := strings.Replace(fail, `raise ValueError(`, `raise type(email, (Exception,), {})(`, 1)
	fourth := executeCode(t, c1, class, session)
	assertNoPII(t, "the reply of an exception named by PII", fourth.raw)
	if fourth.out.Error == nil || fourth.out.Error.Type != tokens["Email"] {
		t.Errorf("error = %+v, want its type shown as %s", fourth.out.Error, tokens["Email"])
	}
	if b, err := os.ReadFile(logFile); err == nil {
		assertNoPII(t, "the session log", string(b))
	}

	// Another MCP session of the tenant gets the tokens back as they are,
	// in its own session and when it names the first one's: a token is
	// restored only in the MCP session that issued it.
	c2 := mcpSession(t, e.setup, "default")
	tok := tokens["Email"]
	for _, continued := range []string{"", session} {
		r := executeCode(t, c2, fmt.Sprintf("print(len(%q), %q)", tok, tok), continued)
		if want := fmt.Sprintf("%d %s\n", len(tok), tok); r.isError || r.out.Stdout != want {
			t.Errorf("another MCP session (session argument %q) printed %q, want %q: the token must stay as it is\n%s",
				continued, r.out.Stdout, want, r.text)
		}
	}
}

// waitRestarted waits until the plugin key runs again after a crash.
func waitRestarted(t *testing.T, s setup, key string, before pluginJSON) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		p := listPlugins(t, s)[key]
		if p.Status == "ok" && p.PID != before.PID && p.Restarts > before.Restarts {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not restart within 15s: %+v", key, listPlugins(t, s)[key])
}

// execJSON is `cexecctl exec --json` output.
type execJSON struct {
	Stdout string `json:"stdout"`
	Error  *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func ctlExec(t *testing.T, s setup, tenant, code string) execJSON {
	t.Helper()
	out, errOut, _ := ctl(t, s, "exec", "--json", "--tenant", tenant, "-c", code)
	var r execJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exec --json: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	return r
}

// TestGuardPolicy: a tenant's policy refuses code and tool calls with
// errors that name the rule, in every execution, operator's included.
// It is long because one daemon with the policy serves every refusal it
// checks.
func TestGuardPolicy(t *testing.T) {
	e := newGuardEnv(t, "cexec-plugin-guard-pii", "")
	out := filepath.Join(e.files, "out") + "/"
	tenant := fmt.Sprintf(`
tenant "terse" {
  policy {
    max_output = "200B"
  }
}

tenant "locked" {
  policy {
    max_tool_calls = 3
    allow     = ["filesystem/read_*", "filesystem/write_file", "filesystem/move_file"]
    deny      = ["filesystem/move_file"]
    deny_code = ["os\\.system"]
    constraint "filesystem/write_file" {
      argument = "path"
      prefix   = %q
    }
  }
}
`, out)
	f, err := os.OpenFile(e.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(tenant); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, e.setup)
	customer := filepath.Join(e.files, "customer.txt")

	for _, tc := range []struct {
		name, code string
		// wantStdout is what the program printed before the refusal.
		wantStdout string
		wantError  string
	}{
		{
			name:      "deny_code",
			code:      "print('ran')\nimport os\nos.system('id')\n",
			wantError: `PermissionError: the code was not run: policy: code matches deny_code pattern "os\\.system"`,
		},
		{
			name:      "deny",
			code:      fmt.Sprintf("from servers.filesystem import move_file\nmove_file(source=%q, destination=%q)\n", customer, out+"moved.txt"),
			wantError: `PermissionError: policy: tool filesystem/move_file is denied by deny pattern "filesystem/move_file"`,
		},
		{
			name:      "allow",
			code:      fmt.Sprintf("from servers.filesystem import get_file_info\nget_file_info(path=%q)\n", customer),
			wantError: `PermissionError: policy: tool filesystem/get_file_info is not allowed (allow: "filesystem/read_*", "filesystem/write_file", "filesystem/move_file")`,
		},
		{
			name:      "constraint",
			code:      fmt.Sprintf("from servers.filesystem import write_file\nwrite_file(path=%q, content='x')\n", filepath.Join(e.files, "escaped.txt")),
			wantError: fmt.Sprintf(`PermissionError: policy: filesystem/write_file argument "path" must start with %q`, out),
		},
		{
			name:       "constraint allows",
			code:       fmt.Sprintf("from servers.filesystem import write_file\nwrite_file(path=%q, content='x')\nprint('written')\n", out+"ok.txt"),
			wantStdout: "written\n",
		},
		{
			name: "max_tool_calls",
			code: fmt.Sprintf("from servers.filesystem import read_text_file\nfor i in range(4):\n"+
				"    read_text_file(path=%q)\n    print(i)\n", customer),
			wantStdout: "0\n1\n2\n",
			wantError:  "PermissionError: policy: execution exceeded max_tool_calls (3)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctlExec(t, e.setup, "locked", tc.code)
			if r.Stdout != tc.wantStdout {
				t.Errorf("stdout %q, want %q", r.Stdout, tc.wantStdout)
			}
			got := ""
			if r.Error != nil {
				got = r.Error.Type + ": " + r.Error.Message
			}
			if got != tc.wantError {
				t.Errorf("error\n  %s\nwant\n  %s", got, tc.wantError)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(e.files, "escaped.txt")); err == nil {
		t.Error("the constrained write_file went through")
	}
	if _, err := os.Stat(customer); err != nil {
		t.Errorf("the denied move_file went through: %v", err)
	}
	// max_output holds for model-facing output, after tokenizing.
	terse := executeCode(t, mcpSession(t, e.setup, "terse"), "print('jane.roe@example.com ' * 100)\n", "")
	if !strings.HasPrefix(terse.out.Stdout, "[EMAIL_1] [EMAIL_1] ") || len(terse.out.Stdout) > 200 ||
		!strings.Contains(terse.out.Stdout, "\n(output truncated: ") || !strings.HasSuffix(terse.out.Stdout, "exceed max_output 200 bytes)") {
		t.Errorf("max_output 200 over MCP: stdout %q (%d bytes)", terse.out.Stdout, len(terse.out.Stdout))
	}
	assertNoPII(t, "the terse tenant's reply", terse.raw)
	// The default tenant has no policy.
	if r := ctlExec(t, e.setup, "default", "import os\nprint(os.system('true'))\n"); r.Error != nil || r.Stdout != "0\n" {
		t.Errorf("default tenant: %+v", r)
	}
}

// TestGuardStrict: when the guard plugin is down for good, a strict
// tenant's executions fail closed with a message that says so, and its
// model-facing output is withheld; a tenant that is not strict goes on,
// but its model-facing output is withheld too (nothing could check it),
// unless its policy says pii_fail_open.
func TestGuardStrict(t *testing.T) {
	// The guard runs from a copy of its binary that the test removes, so
	// it cannot come back after the kill.
	name := fmt.Sprintf("cexec-plugin-guard-pii-strict-%d", os.Getpid())
	bin := filepath.Join(bins.pluginDir, name)
	src, err := os.ReadFile(filepath.Join(bins.pluginDir, "cexec-plugin-guard-pii"))
	if err != nil {
		testutil.SkipMissing(t, "guard-pii was not built: %v", err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(bin) })
	e := newGuardEnv(t, name, "\ntenant \"careful\" {\n  policy {\n    strict = true\n  }\n}\n"+
		"tenant \"relaxed\" {\n  policy {\n    pii_fail_open = true\n  }\n}\n")
	startDaemon(t, e.setup)

	read := fmt.Sprintf("from servers.filesystem import read_text_file\nprint(read_text_file(path=%q)['content'])\n",
		filepath.Join(e.files, "customer.txt"))
	up := executeCode(t, mcpSession(t, e.setup, "careful"), read, "")
	if up.isError || !strings.Contains(up.text, "[EMAIL_1]") {
		t.Fatalf("with the guard up: %s", up.text)
	}
	assertNoPII(t, "the strict tenant's reply", up.raw)

	guard := listPlugins(t, e.setup)["guard/pii"]
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(guard.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// "Down" is once the daemon has seen the process go: until then this
	// guard's CheckCode, which it answered as not implemented, is not
	// asked again, and code runs as it would have a moment earlier.
	waitFor(t, "the daemon to see the guard's process gone", func() bool {
		return listPlugins(t, e.setup)["guard/pii"].Status != "ok"
	})

	r := ctlExec(t, e.setup, "careful", "print('ran')\n")
	if r.Stdout != "" || r.Error == nil || r.Error.Type != "PermissionError" ||
		!strings.Contains(r.Error.Message, "the code was not run: guard pii: unavailable, and the tenant's policy is strict, so CheckCode fails closed") {
		t.Errorf("strict tenant with its guard down: %+v", r)
	}
	down := executeCode(t, mcpSession(t, e.setup, "careful"), read, "")
	assertNoPII(t, "the strict tenant's reply with its guard down", down.raw)
	if !down.isError {
		t.Errorf("the strict tenant's execute_code did not fail with its guard down:\n%s", down.text)
	}
	t.Logf("strict tenant, guard down, over MCP: %s", down.text)

	if r := ctlExec(t, e.setup, "default", "print('ran')\n"); r.Error != nil || r.Stdout != "ran\n" {
		t.Errorf("a tenant that is not strict stopped with the guard down: %+v", r)
	}
	const leak = "print('jane.roe@example.com')\n"
	withheld := executeCode(t, mcpSession(t, e.setup, "default"), leak, "")
	assertNoPII(t, "the default tenant's reply with its guard down", withheld.raw)
	if !withheld.isError || !strings.Contains(withheld.text, "OutputWithheld") || !strings.Contains(withheld.text, "try again") {
		t.Errorf("the default tenant's execute_code with its guard down:\n%s", withheld.text)
	}
	if open := executeCode(t, mcpSession(t, e.setup, "relaxed"), leak, ""); !strings.Contains(open.out.Stdout, "jane.roe@example.com") {
		t.Errorf("the pii_fail_open tenant's execute_code with its guard down:\n%s", open.text)
	}
}

// TestGuardSandboxCut: when the sandbox's output cap cuts an address in
// two, the model gets neither half; the operator sees the raw cut. Output
// that is not UTF-8 is tokenized too.
func TestGuardSandboxCut(t *testing.T) {
	e := newGuardEnv(t, "cexec-plugin-guard-pii", "")
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "  pool {\n", "  limits {\n    output = \"1KiB\"\n  }\n  pool {\n", 1))
	if err := os.WriteFile(e.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, e.setup)
	// 1011 bytes, then the address: the cap at 1024 keeps "jane.roe@exam".
	const code = "print('w ' * 503 + 'mail jane.roe@example.com')\n"
	if r := ctlExec(t, e.setup, "default", code); !strings.HasSuffix(r.Stdout, "mail jane.roe@exam") {
		t.Errorf("operator output: %.40q…%q", r.Stdout, r.Stdout[max(len(r.Stdout)-40, 0):])
	}
	r := executeCode(t, mcpSession(t, e.setup, "default"), code, "")
	if strings.Contains(r.out.Stdout, "jane") || strings.Contains(r.raw, "jane.roe") || !strings.HasPrefix(r.out.Stdout, "w w ") {
		t.Errorf("model-facing output of a cut address:\n%s", r.text)
	}

	// One line longer than the cap leaves nothing that can be checked; a
	// note says what was dropped, so the agent knows to split its lines.
	r = executeCode(t, mcpSession(t, e.setup, "default"), "print('x' * 2000)\n", "")
	if strings.Contains(r.text, "xxx") || !strings.Contains(r.text, "(1024 bytes of an unfinished line were dropped at the output limit") {
		t.Errorf("model-facing output of a line longer than the cap:\n%s", r.text)
	}

	// Output that is not UTF-8 (a Latin-1 file printed as it is) is checked
	// like any other, its bad byte shown as U+FFFD, instead of failing the
	// guard's gRPC call and withholding everything.
	const latin1 = "import sys\nsys.stdout.buffer.write(b'caf\\xe9 jane.roe@example.com\\n')\n"
	r = executeCode(t, mcpSession(t, e.setup, "default"), latin1, "")
	if r.isError || r.out.Error != nil || !strings.HasPrefix(r.out.Stdout, "caf\uFFFD [EMAIL_") || strings.Contains(r.raw, "jane.roe") {
		t.Errorf("model-facing output of Latin-1 text:\n%s", r.text)
	}
}

// TestGuardPolicyDiagnostics: a mistake in a tenant's policy is reported
// with its line by `cexecd validate`, and stops the daemon before it
// serves.
func TestGuardPolicyDiagnostics(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cexec.hcl")
	body := fmt.Sprintf(`cexec {
  data_dir   = %q
  socket     = %q
  plugin_dir = %q
}

tenant "acme" {
  policy {
    max_tool_calls = 0
    deny           = ["filesystem/["]
  }
}
`, filepath.Join(dir, "data"), filepath.Join(dir, "cexecd.sock"), bins.pluginDir)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		cfg + ":9:22: error: Invalid max_tool_calls",
		cfg + `:10:23: error: Invalid tool pattern`,
	}
	for _, args := range [][]string{{"validate", "-config", cfg}, {"-config", cfg}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecd"), args...).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("cexecd %v: %v, want exit 1\n%s", args, err, b)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("cexecd %v lacks %q:\n%s", args, w, b)
			}
		}
	}
}
