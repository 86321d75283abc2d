package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
)

// toolsSetup is a daemon with the real reference MCP servers of
// test/peers: filesystem over a directory of a few files, memory with its
// file in the test's directory, and everything (for a call that lasts).
// The bwrap sandbox and the embeddings selector come from the default
// cexec.hcl's blocks.
type toolsSetup struct {
	setup
	files  string // the filesystem server's root
	memory string // MEMORY_FILE_PATH
}

func newToolsSetup(t *testing.T) toolsSetup {
	t.Helper()
	for _, p := range []string{"mcp-server-filesystem", "mcp-server-memory", "mcp-server-everything"} {
		testpeers.Bin(t, p)
	}
	peers := testpeers.Dir()
	var blocks []string
	for _, want := range []string{`plugin "sandbox" "bwrap"`, `plugin "selector" "embeddings"`} {
		i := slices.IndexFunc(bins.plugins, func(b string) bool { return strings.HasPrefix(b, want) })
		if i < 0 {
			testutil.SkipMissing(t, "%s is not built", want)
		}
		blocks = append(blocks, bins.plugins[i])
	}
	skills, err := filepath.Abs(filepath.Join("..", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cexec-e2e-tools-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ts := toolsSetup{
		setup:  setup{dir: dir, sock: filepath.Join(dir, "run", "cexecd.sock"), config: filepath.Join(dir, "cexec.hcl")},
		files:  filepath.Join(dir, "files"),
		memory: filepath.Join(dir, "memory.jsonl"),
	}
	for name, body := range map[string]string{
		"notes/apple.txt":  "fruit: apple\ncolor: red\n",
		"notes/banana.txt": "fruit: banana\ncolor: yellow\n",
		"notes/carrot.txt": "vegetable: carrot\ncolor: orange\n",
		"notes/readme.md":  "fruit: not a note (wrong extension)\n",
		"top.txt":          "fruit: outside the notes folder\n",
	} {
		p := filepath.Join(ts.files, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`cexec {
  data_dir    = %q
  socket      = %q
  plugin_dir  = %q
  servers_dir = %q
  skills_dir  = %q
  log_level   = "debug"
}

%s

%s

# These tests read tools' raw output; PII tokens are e2e/guard_test.go's.
pipeline {
  selector = "embeddings"
  guards   = []
}

sandbox {
  backend = "bwrap"
}

mcp_server "filesystem" {
  command = %q
  args    = [%q]
}

mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = %q }
}

mcp_server "everything" {
  command = %q
}
`, filepath.Join(dir, "data"), ts.sock, bins.pluginDir, filepath.Join(dir, "servers"), skills, blocks[0], blocks[1],
		filepath.Join(peers, "mcp-server-filesystem"), ts.files,
		filepath.Join(peers, "mcp-server-memory"), ts.memory,
		filepath.Join(peers, "mcp-server-everything"))
	if err := os.WriteFile(ts.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return ts
}

type serverJSON struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	State     string `json:"state"`
	Tools     int    `json:"tools"`
	PID       int    `json:"pid"`
	Restarts  int    `json:"restarts"`
	Scope     string `json:"scope"`
	Instances []struct {
		Tenant   string `json:"tenant"`
		State    string `json:"state"`
		PID      int    `json:"pid"`
		InFlight int    `json:"in_flight"`
	} `json:"instances"`
}

func listServers(t *testing.T, s setup) map[string]serverJSON {
	t.Helper()
	var r struct {
		Servers []serverJSON `json:"servers"`
	}
	if err := json.Unmarshal([]byte(mustCtl(t, s, "servers", "ls", "--json")), &r); err != nil {
		t.Fatal(err)
	}
	out := map[string]serverJSON{}
	for _, x := range r.Servers {
		out[x.Name] = x
	}
	return out
}

type searchHit struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Import      string          `json:"import"`
	Description string          `json:"description"`
	StubSource  string          `json:"stub_source"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type searchJSON struct {
	Hits     []searchHit `json:"hits"`
	Warnings []string    `json:"warnings"`
}

func searchTools(t *testing.T, s setup, args ...string) searchJSON {
	t.Helper()
	var r searchJSON
	if err := json.Unmarshal([]byte(mustCtl(t, s, append([]string{"tools", "search", "--json"}, args...)...)), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// toolsExec runs a program through `cexecctl exec --json`.
func toolsExec(t *testing.T, s setup, code string) sbxResultTools {
	t.Helper()
	out, errOut, _ := ctl(t, s, "exec", "--json", "--timeout", "60s", "-c", code)
	var r sbxResultTools
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exec --json: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	return r
}

// sbxResultTools is the part of `exec --json` these tests read.
type sbxResultTools struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	Error    *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	ToolCalls []struct {
		Server string `json:"server"`
		Tool   string `json:"tool"`
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
	} `json:"tool_calls"`
}

// TestTools drives one real cexecd through the scenario below.
// It is long because one daemon, with its upstream servers, serves every
// subtest, and the subtests build on the catalog the earlier ones refreshed;
// a daemon per check would cost seconds each.
func TestTools(t *testing.T) {
	ts := newToolsSetup(t)
	s := ts.setup
	startDaemon(t, s)
	if out, errOut, code := ctl(t, s, "exec", "-c", "print(1+1)"); code != 0 || out != "2\n" {
		if strings.Contains(errOut, "bubblewrap") || strings.Contains(errOut, "user namespaces") || strings.Contains(errOut, "cannot create a sandbox") {
			testutil.SkipMissing(t, "sandboxes cannot run on this machine: %s", strings.TrimSpace(errOut))
		}
		t.Fatalf("exec print(1+1): exit %d\n%s%s", code, out, errOut)
	}

	t.Run("servers and tools ls", func(t *testing.T) {
		srv := listServers(t, s)
		for _, name := range []string{"filesystem", "memory", "everything"} {
			if x := srv[name]; x.State != "ok" || x.Transport != "stdio" || x.Tools == 0 || x.PID == 0 {
				t.Errorf("server %s: %+v", name, x)
			}
		}
		out := mustCtl(t, s, "servers", "ls")
		if !strings.Contains(out, "NAME") || !strings.Contains(out, "filesystem") || !strings.Contains(out, "2025-") {
			t.Errorf("servers ls:\n%s", out)
		}

		var all struct {
			Tools []struct {
				ID     string `json:"id"`
				Server string `json:"server"`
				Import string `json:"import"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "tools", "ls", "--json")), &all); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range all.Tools {
			ids = append(ids, x.ID)
		}
		for _, want := range []string{"filesystem/read_text_file", "filesystem/list_directory", "memory/create_entities", "memory/read_graph"} {
			if !slices.Contains(ids, want) {
				t.Errorf("tools ls lacks %s: %v", want, ids)
			}
		}
		text := mustCtl(t, s, "tools", "ls", "memory")
		if !strings.Contains(text, "memory/open_nodes") || strings.Contains(text, "filesystem/") {
			t.Errorf("tools ls memory:\n%s", text)
		}
		if _, errOut, code := ctl(t, s, "tools", "ls", "github"); code != 1 || !strings.Contains(errOut, `unknown server "github"`) {
			t.Errorf("tools ls github: exit %d, %s", code, errOut)
		}
	})

	t.Run("tools show", func(t *testing.T) {
		out := mustCtl(t, s, "tools", "show", "filesystem/read_text_file")
		for _, want := range []string{"from cexec import call_tool", "def read_text_file(", "path: str", `call_tool("filesystem", "read_text_file"`} {
			if !strings.Contains(out, want) {
				t.Errorf("stub lacks %q:\n%s", want, out)
			}
		}
		var full struct {
			Tool struct {
				Import string `json:"import"`
			} `json:"tool"`
			StubSource  string `json:"stub_source"`
			InputSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"input_schema"`
			Annotations map[string]any `json:"annotations"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "tools", "show", "--json", "filesystem/read_text_file")), &full); err != nil {
			t.Fatal(err)
		}
		if full.StubSource != out || full.Tool.Import != "from servers.filesystem import read_text_file" || full.InputSchema.Properties["path"] == nil || full.Annotations["readOnlyHint"] != true {
			t.Errorf("show --json: %+v", full)
		}
		if _, errOut, code := ctl(t, s, "tools", "show", "filesystem/read_txt_file"); code != 1 || !strings.Contains(errOut, "closest: filesystem/read_text_file") {
			t.Errorf("show of a typo: exit %d, %s", code, errOut)
		}
	})

	t.Run("tools search", func(t *testing.T) {
		// The selector indexes the catalog in the background after start.
		deadline := time.Now().Add(20 * time.Second)
		for r := searchTools(t, s, "read a file"); len(r.Warnings) > 0; r = searchTools(t, s, "read a file") {
			if time.Now().After(deadline) {
				t.Fatalf("search still falls back after 20s: %v", r.Warnings)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, detail := range []string{"name", "description", "full"} {
			r := searchTools(t, s, "read a file", "--detail", detail, "--limit", "3")
			i := slices.IndexFunc(r.Hits, func(h searchHit) bool {
				return h.ID == "filesystem/read_text_file"
			})
			if i < 0 || len(r.Hits) > 3 {
				t.Errorf("detail %s: filesystem/read_text_file not in the top 3: %+v", detail, r.Hits)
				continue
			}
			h := r.Hits[i]
			if h.Import != "from servers.filesystem import read_text_file" || h.Kind != "tool" {
				t.Errorf("detail %s: hit %+v", detail, h)
			}
			if (h.Description != "") != (detail != "name") {
				t.Errorf("detail %s: description %q", detail, h.Description)
			}
			if full := detail == "full"; full != strings.Contains(h.StubSource, "from cexec import call_tool") || full != bytes.Contains(h.InputSchema, []byte(`"path"`)) {
				t.Errorf("detail %s: stub %q schema %s", detail, h.StubSource, h.InputSchema)
			}
		}
		r := searchTools(t, s, "store entities in a knowledge graph", "--server", "memory", "--limit", "2")
		if len(r.Hits) == 0 || r.Hits[0].ID != "memory/create_entities" {
			t.Errorf("memory search: %+v", r.Hits)
		}
		r = searchTools(t, s, "summarise a CSV file into a report", "--detail", "full", "--limit", "3")
		if !slices.ContainsFunc(r.Hits, func(h searchHit) bool {
			return h.ID == "skills/csv_report" && h.Kind == "skill" && h.StubSource != ""
		}) {
			t.Errorf("the shared skill csv_report is not found: %+v", r.Hits)
		}
		if _, errOut, code := ctl(t, s, "tools", "search", "x", "--detail", "everything"); code != 2 || !strings.Contains(errOut, "--detail") {
			t.Errorf("bad --detail: exit %d, %s", code, errOut)
		}
	})

	t.Run("one program through both servers", func(t *testing.T) {
		code := fmt.Sprintf(`
import json
from servers.filesystem import list_directory, read_text_file
from servers.memory import create_entities, open_nodes

notes = %q
listing = list_directory(path=notes)["content"]
names = sorted(line[len("[FILE] "):] for line in listing.splitlines() if line.startswith("[FILE] "))
fruits = {}
for name in names:
    if not name.endswith(".txt"):
        continue
    text = read_text_file(path=notes + "/" + name)["content"]
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    if "fruit" in fields:
        fruits[fields["fruit"]] = fields["color"]
create_entities(entities=[
    {"name": f, "entityType": "fruit", "observations": ["color " + c]} for f, c in sorted(fruits.items())
])
back = open_nodes(names=sorted(fruits))
print(json.dumps({
    "listed": names,
    "stored": sorted((e["name"], e["entityType"], e["observations"]) for e in back["entities"]),
}))
`, filepath.Join(ts.files, "notes"))
		r := toolsExec(t, s, code)
		if r.ExitCode != 0 || r.Error != nil {
			t.Fatalf("program failed: %+v", r)
		}
		var got struct {
			Listed []string `json:"listed"`
			Stored [][]any  `json:"stored"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
			t.Fatalf("stdout %q: %v", r.Stdout, err)
		}
		if strings.Join(got.Listed, ",") != "apple.txt,banana.txt,carrot.txt,readme.md" {
			t.Errorf("listed %v", got.Listed)
		}
		if b, _ := json.Marshal(got.Stored); string(b) != `[["apple","fruit",["color red"]],["banana","fruit",["color yellow"]]]` {
			t.Errorf("read back from memory: %s", b)
		}
		var calls []string
		for _, c := range r.ToolCalls {
			if !c.OK {
				t.Errorf("call %s/%s failed: %s", c.Server, c.Tool, c.Error)
			}
			calls = append(calls, c.Server+"/"+c.Tool)
		}
		want := "filesystem/list_directory,filesystem/read_text_file,filesystem/read_text_file,filesystem/read_text_file,memory/create_entities,memory/open_nodes"
		if strings.Join(calls, ",") != want {
			t.Errorf("tool calls %v, want %s", calls, want)
		}
		// The memory server really stored them.
		b, err := os.ReadFile(ts.memory)
		if err != nil || !bytes.Contains(b, []byte(`"banana"`)) || bytes.Contains(b, []byte(`"carrot"`)) {
			t.Errorf("memory file: %v\n%s", err, b)
		}
	})

	t.Run("argument validation names the field", func(t *testing.T) {
		r := toolsExec(t, s, `
from cexec import call_tool, ToolError
for args in ({"path": 42}, {}):
    try:
        call_tool("filesystem", "read_text_file", args)
        print("no error")
    except ToolError as e:
        print(e.type, "|", e)
`)
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if r.ExitCode != 0 || len(lines) != 2 {
			t.Fatalf("program: %+v", r)
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "InvalidArguments |") || !strings.Contains(l, "path") {
				t.Errorf("validation error %q does not name the field", l)
			}
		}
		if !strings.Contains(lines[0], "string") {
			t.Errorf("type error %q does not say what was expected", lines[0])
		}
	})

	t.Run("upstream killed mid-call", func(t *testing.T) {
		before := listServers(t, s)["everything"]
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), "exec", "--timeout", "60s", "-c", `
from cexec import call_tool, ToolError
print("calling", flush=True)
try:
    call_tool("everything", "trigger-long-running-operation", {"duration": 30, "steps": 30})
    print("finished")
except ToolError as e:
    print("ToolError", e.type, "|", e)
`)
		cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+s.sock)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || sc.Text() != "calling" {
			t.Fatalf("program did not start: %q %s", sc.Text(), stderr.String())
		}
		// Let the call reach the server before killing it.
		time.Sleep(time.Second)
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatalf("kill everything (pid %d): %v", before.PID, err)
		}
		var rest []string
		for sc.Scan() {
			rest = append(rest, sc.Text())
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("program: %v\n%s", err, stderr.String())
		}
		if len(rest) != 1 || !strings.HasPrefix(rest[0], "ToolError ToolUnavailable |") ||
			!strings.Contains(rest[0], "everything") || !strings.Contains(rest[0], "restarted") {
			t.Errorf("the killed call did not fail with a clear ToolError: %q", rest)
		}

		// The server comes back under a new pid and the next execution
		// works.
		deadline := time.Now().Add(30 * time.Second)
		for {
			now := listServers(t, s)["everything"]
			if now.State == "ok" && now.PID != 0 && now.PID != before.PID && now.Restarts > before.Restarts {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("everything not restarted after 30s: %+v (was %+v)", now, before)
			}
			time.Sleep(100 * time.Millisecond)
		}
		r := toolsExec(t, s, `
from servers.everything import echo
print(echo(message="back again"))
`)
		if r.ExitCode != 0 || !strings.Contains(r.Stdout, "back again") {
			t.Errorf("execution after the restart: %+v", r)
		}
	})

	t.Run("selector restarted", func(t *testing.T) {
		before := listPlugins(t, s)["selector/embeddings"]
		if before.PID == 0 {
			t.Fatalf("selector plugin: %+v", before)
		}
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// A restarted plugin starts with an empty index: searches fall
		// back (with a warning) until cexecd has indexed the catalog again.
		deadline := time.Now().Add(30 * time.Second)
		for {
			p := listPlugins(t, s)["selector/embeddings"]
			r := searchTools(t, s, "read a file", "--detail", "name", "--limit", "3")
			found := slices.ContainsFunc(r.Hits, func(h searchHit) bool { return h.ID == "filesystem/read_text_file" })
			if p.Restarts > before.Restarts && p.Status == "ok" && len(r.Warnings) == 0 && found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the selector's restart: plugin %+v, search %+v", p, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("tools refresh", func(t *testing.T) {
		out := mustCtl(t, s, "tools", "refresh", "memory", "--json")
		var r struct {
			Tools int `json:"tools"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Tools != listServers(t, s)["memory"].Tools || r.Tools == 0 {
			t.Errorf("refresh memory: %s %v", out, err)
		}
		if out := mustCtl(t, s, "tools", "refresh"); !strings.HasPrefix(out, "refreshed all servers: ") {
			t.Errorf("refresh: %q", out)
		}
	})
}

// TestBenchTools runs `cexecctl bench tools` briefly: its private daemon
// and the reference memory server.
func TestBenchTools(t *testing.T) {
	mem := testpeers.Bin(t, "mcp-server-memory")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), "bench", "tools", "--json", "--rounds", "1",
		"--plugin-dir", bins.pluginDir, "--memory-server", mem)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "bubblewrap") || strings.Contains(stderr.String(), "user namespaces") {
			testutil.SkipMissing(t, "sandboxes cannot run on this machine: %s", stderr.String())
		}
		t.Fatalf("bench tools: %v\n%s", err, stderr.String())
	}
	var r map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	for _, k := range []string{"loop_1000_ms", "loop_1000_exec_ms", "loop_1000_sequential_ms",
		"loop_1000_direct_ms", "loop_1000_direct_concurrent_ms"} {
		if v, ok := r[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v", k, r[k])
		}
	}
	// The overhead is a difference of two timings, which a busy machine
	// can make negative; it must be there.
	if _, ok := r["call_overhead_ms"].(float64); !ok {
		t.Errorf("call_overhead_ms = %v", r["call_overhead_ms"])
	}
	if r["loop_threads"] != float64(8) || r["daemon"] != "private" {
		t.Errorf("loop_threads %v, daemon %v", r["loop_threads"], r["daemon"])
	}
	t.Logf("bench tools: %s", stdout.String())
}
