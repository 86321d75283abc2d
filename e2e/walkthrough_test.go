package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
)

// walkthroughWant is what each example under examples/walkthrough must
// print: the facts its README says it shows. An example without an entry
// fails the test, so a new one cannot go unchecked.
var walkthroughWant = map[string][]string{
	"01-basic-tool-call": {
		"filesystem  stdio", ". filesystem/read_text_file  score", "def read_text_file(",
		"read_text_file returned a dict with keys ['content']", "hello.txt says: hello from cexec",
	},
	"02-multi-tool-chain": {
		"memory now knows apple (fruit): color: red", "memory now knows banana (fruit): color: yellow",
		"chain: list_directory -> 3 x read_text_file -> create_entities -> open_nodes",
	},
	"03-data-filtering": {
		"tool result: 27690 characters, 2000 rows", "north orders of 990 or more: 4: 108, 216, 1108, 1216",
		"total per region: east=250000, north=249000, south=249500, west=250500", "printed 165 characters instead of 27690",
	},
	"04-control-flow": {
		"fruit: apple.txt, banana.txt", "vegetable: carrot.txt", "handled ToolError: ENOENT",
		"no notes/today.txt, trying the next", "fell back to notes/apple.txt: fruit: apple",
		"while loop found the color after reading 2 lines: color: yellow",
	},
	"05-state-persistence": {
		"saved: {'bytes': 53, 'name': 'walkthrough-colors.json', 'version': '", "loaded colors: {'apple': 'red', 'banana': 'yellow'} after 1 save(s)",
		"it is a file in /workspace/state: True", "missing state with a default: (none)",
		`{"colors":{"apple":"red","banana":"yellow"},"runs":1}`, "walkthrough-colors.json  json", "total kept between executions: 42",
	},
	"06-skills": {
		"saved skill note_fields import as: skills.note_fields", "note_fields  tenant  skills.note_fields",
		"skills.note_fields.read_notes() found 3 notes", "carrot.txt: color orange",
	},
	"07-file-operations": {
		"wrote: ['apples: 3', 'bananas: 6']", "edit_file diff: ['-apples: 3', '+apples: 5']",
		"after edit: ['apples: 5', 'bananas: 6']", "get_file_info size: 21 isFile: true",
		"search_files *.txt under notes: ['apple.txt', 'banana.txt', 'carrot.txt']", "log.txt has 1 line(s)",
	},
	"08-cross-session-persistence": {
		"day 1: read ['apple', 'banana'], checkpoint #1 says next is carrot",
		"last checkpoint: #1 read two of three notes", `"next": "carrot"`,
		"day 2: state says done = ['apple', 'banana']",
		"day 2: memory graph holds ['apple has color: red', 'banana has color: yellow', 'carrot has color: orange']",
		"walkthrough-day1", "walkthrough-day2",
	},
	"09-configuration": {
		"tenant-policy.hcl: configuration is valid", "broken.hcl:2:15: error: Invalid log level \"chatty\"",
		"broken.hcl:7:14: error: Invalid size", `pipeline: {"codegen": ["rules"], "guards": ["pii"]`,
		"plugins: sandbox/bwrap, selector/embeddings, guard/pii, codegen/rules", "servers: filesystem (shared), memory (tenant)",
	},
	"10-mcp-server-from-a-client": {
		"tools/list: 8 tools: call_tool, execute_code, execute_task, list_tools, search_tools, skills, state, workflow",
		"servers.filesystem.list_directory(*, path: str) -> {content: str}", "3 notes: apple.txt, banana.txt, carrot.txt",
		`{"content":"hello from cexec\n"}`, "cexec://servers/filesystem/read_text_file.py",
	},
	"11-local-tools": {
		"local tools package textutils, tools: 2", "local tools package unitconv, tools: 1",
		"unitconv/convert_length (local=true): from servers.unitconv import convert_length",
		`search "convert kilometres to miles" -> unitconv/convert_length`,
		"convert_length 5 km in mi: {'value': 3.1069, 'unit': 'mi'}",
		"tool calls through cexecd: 1 (filesystem/read_text_file); the local tools ran in the sandbox",
	},
	"12-statefulness-over-mcp": {
		"session A: program 1 updated state to step 2", "session A: program 2 reads its workspace: written in session A",
		`session B: state tool reads {"seen":["apple","banana"],"step":2}`, "state list includes walkthrough-mcp.json: true",
		"session B: hello, session B | written in session A", "skills list includes walkthrough_greet: true",
	},
	"13-llm-code-generation": {
		"generator  llm (walkthrough-coder), 500 prompt + 60 completion tokens", "words: 13", "most common: the x4, sat x2, on x2",
		"execute_task replied:\n    ```python\n    from servers.textutils import word_count",
		"2 request(s) to model walkthrough-coder", "prompt carries the stub it found: True",
		"the e-mail address went as a token: True | in the clear: False",
	},
	"14-progressive-disclosure": {
		"tools/list: 8 face tools", "memory (servers.memory): 9 tools",
		"detail_level name (71 characters):\n    memory/create_entities\n",
		"memory/create_entities: Create multiple new entities in the knowledge graph",
		"servers.memory.create_entities(*, entities: list[", "6. execute_code with what step 4 said: True",
	},
	"15-pii-tokens": {
		"email: [EMAIL_1]", "phone: [PHONE_1]", "execute_code with [EMAIL_1] in a string literal: wrote forward.txt",
		`the model sees: {"content":"send the report to [EMAIL_1]"}`,
		"forward.txt: send the report to jane.roe@example.com", "call-back.txt: call +44 20 7946 0958",
		"other-session.txt: send to [EMAIL_1]",
	},
	"16-workflow": {
		"workflows/notes-to-memory.yaml: ok (examples/notes-to-memory:1.0.0)",
		`broken.yaml:11:17: task read: with.server: "filesystme" is not an mcp_server of cexec.hcl`,
		"broken.yaml:16:13: task fetch: call: http is not supported",
		`broken.yaml:23:19: then: "nowhere" is neither continue, exit, end nor a task of this list`,
		"state:    completed", `output:   {"notes":3,"remembered":["apple","banana"]}`,
		"examples/notes-to-memory:1.0.0  completed  13 ", "caught  /tally/try@0 ",
		"for loop: 3 notes read", "switch on note 0 (apple): fruit, then remember",
		"switch on note 2 (carrot): not a fruit, exit the iteration",
		"try/catch caught the first try: RuntimeError: try 1 fails on purpose",
		`retried: the Python script step count, second try: {"fruits":["apple","banana"],"notes":3,"tries":2}`,
	},
	"17-pdf-form": {
		"field plan: combobox options basic/standard/premium default 'standard'",
		"waiting:  ask for form-input (cexecctl workflow signal ",
		`{"properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"], "type": "object"}`,
		"waiting:  approve for approval (cexecctl workflow signal ",
		"filled: True -> forms/ada.pdf",
		`city       "Paris"            user                            confirmed by user, alice`,
		`name       "Ada Lovelace"     tool:filesystem.read_text_file  confirmed by alice`,
		`newsletter false              default                         confirmed by alice`,
		`plan       "premium"          tool:filesystem.read_text_file  confirmed by alice`,
		"forms/ada.pdf city = 'Paris'", "forms/ada.pdf name = 'Ada Lovelace'",
		"forms/ada.pdf newsletter = False", "forms/ada.pdf plan = 'premium'",
	},
}

// walkthroughConfig is the repository's cexec.hcl with what must differ in
// a test: a private socket, the test's plugin binaries, and the pinned
// reference servers of test/peers instead of npx. Everything else (the
// plugins, the pipeline, the memory server per tenant) is the default's.
func walkthroughConfig(t *testing.T, sock string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(), "cexec.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(src)
	peers := testpeers.Dir()
	for _, r := range [][2]string{
		{`plugin_dir = "./bin"`, `plugin_dir = "` + bins.pluginDir + `"` + "\n  socket = \"" + sock + `"`},
		{`command  = "npx"` + "\n" + `  args     = ["-y", "@modelcontextprotocol/server-filesystem", "./data"]`,
			`command  = "` + filepath.Join(peers, "mcp-server-filesystem") + `"` + "\n" + `  args     = ["./data"]`},
		{`command  = "npx"` + "\n" + `  args     = ["-y", "@modelcontextprotocol/server-memory"]`,
			`command  = "` + filepath.Join(peers, "mcp-server-memory") + `"`},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("cexec.hcl no longer has %q; update walkthroughConfig", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return cfg
}

// TestWalkthroughExamples runs every example of examples/walkthrough, as a
// user would after `make run`, against one cexecd started on the default
// config (with the reference servers of test/peers), and checks that each
// prints what it claims to show.
func TestWalkthroughExamples(t *testing.T) {
	testpeers.Bin(t, "mcp-server-filesystem")
	testpeers.Bin(t, "mcp-server-memory")
	for _, want := range []string{`plugin "sandbox" "bwrap"`, `plugin "selector" "embeddings"`, `plugin "guard" "pii"`, `plugin "codegen" "rules"`} {
		if !slices.ContainsFunc(bins.plugins, func(b string) bool { return strings.HasPrefix(b, want) }) {
			testutil.SkipMissing(t, "%s is not built", want)
		}
	}
	buildPlugin(t, "codegen-llm")
	root := testutil.ModuleRoot()
	goBin := filepath.Join(bins.dir, "walkthrough-11-local-tools")
	if err := testutil.GoBuild(goBin, "./examples/walkthrough/11-local-tools"); err != nil {
		t.Fatal(err)
	}
	examples := walkthroughExamples(t, root)

	dir, err := os.MkdirTemp("", "cexec-wt-")
	if err != nil {
		t.Fatal(err)
	}
	s := setup{dir: dir, sock: filepath.Join(dir, "run", "cexecd.sock"), config: filepath.Join(dir, "cexec.hcl")}
	t.Cleanup(func() {
		unmountUnder(t, dir)
		_ = os.RemoveAll(dir)
	})
	// What `make run` puts beside cexec.hcl: the sample data, the shipped
	// local tools, the shared skills and the shared workflows.
	for from, to := range map[string]string{"examples/data": "data", "servers/textutils": "servers/textutils", "skills": "skills", "workflows": "workflows"} {
		if err := os.CopyFS(filepath.Join(dir, to), os.DirFS(filepath.Join(root, from))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.config, []byte(walkthroughConfig(t, s.sock)), 0o600); err != nil {
		t.Fatal(err)
	}
	// 09-configuration checks a config whose plugin_dir comes from this
	// variable, in the daemon's environment.
	t.Setenv("CEXEC_PLUGIN_DIR", bins.pluginDir)
	startDaemon(t, s)
	waitServers(t, s, "filesystem", "memory")

	env := []string{
		"CEXECCTL=" + filepath.Join(bins.dir, "cexecctl"),
		"CEXECD=" + filepath.Join(bins.dir, "cexecd"),
		endpoint.SocketEnv + "=" + s.sock,
		"CEXEC_PLUGIN_DIR=" + bins.pluginDir,
		"WALKTHROUGH_GO_BIN=" + goBin,
	}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, endpoint.AddressEnv+"=") && !strings.HasPrefix(e, endpoint.TenantEnv+"=") {
			env = append(env, e)
		}
	}
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "examples", "walkthrough", name, "run.sh"))
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("run.sh: %v\n%s", err, out)
			}
			for _, want := range walkthroughWant[name] {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if name == "15-pii-tokens" {
				model, _, _ := strings.Cut(string(out), "== on disk")
				for _, raw := range []string{"jane.roe@example.com", "7946 0958"} {
					if strings.Contains(model, raw) {
						t.Errorf("the MCP client saw the raw %q", raw)
					}
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// walkthroughExamples lists the examples and checks each has a README, an
// entry in both indexes and expectations in walkthroughWant.
func walkthroughExamples(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "examples", "walkthrough"))
	if err != nil {
		t.Fatal(err)
	}
	var indexes []string
	for _, p := range []string{"README.md", "examples/walkthrough/README.md"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, string(b))
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		names = append(names, name)
		if _, err := os.Stat(filepath.Join(root, "examples", "walkthrough", name, "README.md")); err != nil {
			t.Errorf("%s has no README.md", name)
		}
		for i, idx := range indexes {
			if !strings.Contains(idx, "walkthrough/"+name) && !strings.Contains(idx, "("+name+"/") {
				t.Errorf("%s is not in the index of %s", name, []string{"README.md", "examples/walkthrough/README.md"}[i])
			}
		}
		if len(walkthroughWant[name]) == 0 {
			t.Errorf("%s has no expected output in walkthroughWant", name)
		}
	}
	for name := range walkthroughWant {
		if !slices.Contains(names, name) {
			t.Errorf("walkthroughWant names %s, which is not an example", name)
		}
	}
	slices.Sort(names)
	return names
}

// waitServers waits until the named upstream servers have listed their
// tools, as a user waits for `cexecctl servers ls` to show them ok.
func waitServers(t *testing.T, s setup, names ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		servers := listServers(t, s)
		ready := true
		for _, n := range names {
			ready = ready && servers[n].Tools > 0
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers %v not ready after 60s: %+v", names, servers)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
