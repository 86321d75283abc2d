package stubgen

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cexec/cexec/internal/testutil"
)

// The toolchain the stubs must satisfy: Debian's Python and mypy (never a pyenv shim).
const (
	python = "/usr/bin/python3"
	mypy   = "/usr/bin/mypy"
)

func requireTool(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		testutil.SkipMissing(t, "%s not installed (apt-get install -y python3 mypy): %v", path, err)
	}
}

// testdataPython is the directory with the cexec stand-ins and the Python check scripts.
func testdataPython(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// TestStubsPassPython generates one tree with the stubs of the reference servers, the kitchen
// sink and all LiveMCPBench tools, then checks every file with py_compile, imports every tool
// and resolves its annotations at run time, and type-checks the whole tree plus agent-style
// usage with one mypy --strict run.
func TestStubsPassPython(t *testing.T) {
	requireTool(t, python)
	requireTool(t, mypy)
	lib := testdataPython(t)
	servers := append(refServers(t), kitchenSink(t))
	servers = append(servers, liveMCPBench(t)...)
	pkgs := Generate(servers)
	root := t.TempDir()
	rep, err := Write(root, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range pkgs {
		for f := range p.Files {
			files = append(files, filepath.FromSlash(f))
		}
	}
	slices.Sort(files)
	if len(rep.Written) != len(files) {
		t.Fatalf("wrote %d files, generated %d", len(rep.Written), len(files))
	}
	t.Logf("%d servers, %d tools, %d files", len(servers), countTools(servers), len(files))

	if out, err := run(t, root, nil, python, append([]string{"-W", "error", "-m", "py_compile"}, files...)...); err != nil {
		t.Fatalf("py_compile: %v\n%s", err, out)
	}
	t.Logf("py_compile: %d files ok", len(files))

	out, err := run(t, root, []string{"PYTHONPATH=" + lib, "PYTHONDONTWRITEBYTECODE=1"}, python, filepath.Join(lib, "import_all.py"), root)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); n != countTools(servers) {
		t.Fatalf("imported %q tools, want %d", out, countTools(servers))
	}
	t.Logf("runtime import + get_type_hints: %s tools ok", strings.TrimSpace(out))

	usage := filepath.Join(lib, "usage.py")
	out, _ = run(t, root, []string{"MYPYPATH=" + lib}, mypy, "--strict", "--explicit-package-bases",
		"--no-color-output", "--show-error-codes", "--cache-dir", filepath.Join(root, ".mypy_cache"),
		"servers", usage)
	checkMypy(t, out, usage, len(files))
}

var (
	mypyError   = regexp.MustCompile(`^(.+?):(\d+): error: .*\[([a-z-]+)\]$`)
	expectError = regexp.MustCompile(`# E: ([a-z-]+)$`)
	mypySummary = regexp.MustCompile(`^Found (\d+) errors? in (\d+) files? \(checked (\d+) source files?\)$`)
)

// checkMypy wants exactly the errors usage.py announces and none in the generated tree.
func checkMypy(t *testing.T, out, usage string, generated int) {
	t.Helper()
	src, err := os.ReadFile(usage)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, line := range strings.Split(string(src), "\n") {
		if m := expectError.FindStringSubmatch(line); m != nil {
			want[strconv.Itoa(i+1)] = m[1]
		}
	}
	got := map[string]string{}
	checked := ""
	for _, line := range strings.Split(out, "\n") {
		if m := mypySummary.FindStringSubmatch(line); m != nil {
			checked = m[3]
		}
		m := mypyError.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if filepath.Base(m[1]) != "usage.py" {
			t.Errorf("mypy error in a generated stub: %s", line)
			continue
		}
		got[m[2]] = m[3]
	}
	for line, code := range want {
		if got[line] != code {
			t.Errorf("usage.py:%s: want mypy error [%s], got %q", line, code, got[line])
		}
	}
	for line, code := range got {
		if want[line] == "" {
			t.Errorf("usage.py:%s: unexpected mypy error [%s]", line, code)
		}
	}
	if checked != strconv.Itoa(generated+1) {
		t.Errorf("mypy checked %q files, want %d; output:\n%s", checked, generated+1, out)
	}
	if t.Failed() {
		t.Logf("mypy output:\n%s", out)
		return
	}
	t.Logf("mypy --strict: %s files checked, 0 errors in generated stubs, %d expected errors in usage.py", checked, len(want))
}

// TestCallArguments runs the kitchen-sink stubs against the cexec stand-in: arguments travel
// under their original MCP names, optional ones only when given (and not equal to their
// default).
func TestCallArguments(t *testing.T) {
	requireTool(t, python)
	lib := testdataPython(t)
	root := t.TempDir()
	if _, err := Write(root, Generate([]Server{kitchenSink(t)})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call string
		want string
	}{
		{"required only", `search_items(query="q", from_="k", tree={"name": "r"})`,
			`{"arguments": {"from": "k", "query": "q", "tree": {"name": "r"}}, "server": "kitchen sink", "tool": "search-items"}`},
		{"defaults are not sent", `search_items(query="q", from_="k", tree={"name": "r"}, max_results=10, mode="fast", ratio=0.5)`,
			`{"arguments": {"from": "k", "query": "q", "tree": {"name": "r"}}, "server": "kitchen sink", "tool": "search-items"}`},
		{"renamed parameters keep MCP names", `search_items(query="q", from_="k", tree={"name": "r"}, max_results=3, _2fa="x", call_tool_=1, _arguments_=True, str_="s", naive="n", arg="m", a_b_c="d")`,
			`{"arguments": {"2fa": "x", "_arguments": true, "a.b c": "d", "call_tool": 1, "from": "k", "max-results": 3, "na\u00efve": "n", "query": "q", "str": "s", "tree": {"name": "r"}, "\u540d\u524d": "m"}, "server": "kitchen sink", "tool": "search-items"}`},
		{"explicit null for a nullable required-less parameter is dropped", `search_items(query="q", from_="k", tree={"name": "r"}, flag=None, when=None)`,
			`{"arguments": {"from": "k", "query": "q", "tree": {"name": "r"}}, "server": "kitchen sink", "tool": "search-items"}`},
		{"non-default values are sent", `search_items(query="q", from_="k", tree={"name": "r"}, mode="exact", flag=False, tags=[])`,
			`{"arguments": {"flag": false, "from": "k", "mode": "exact", "query": "q", "tags": [], "tree": {"name": "r"}}, "server": "kitchen sink", "tool": "search-items"}`},
		{"extra arguments pass through", `passthrough(id="i", **{"x-y": 1})`,
			`{"arguments": {"id": "i", "x-y": 1}, "server": "kitchen sink", "tool": "passthrough"}`},
		{"unparsable schema takes keywords", `broken(a=1)`,
			`{"arguments": {"a": 1}, "server": "kitchen sink", "tool": "broken"}`},
		{"no arguments", `get_data_2()`,
			`{"arguments": {}, "server": "kitchen sink", "tool": "get-data"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := "import json\nfrom servers.kitchen_sink import *\nprint(json.dumps(" + tt.call + ", sort_keys=True))\n"
			out, err := run(t, root, []string{"PYTHONPATH=" + root + ":" + lib, "PYTHONDONTWRITEBYTECODE=1"}, python, "-c", script)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var got, want any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if !bytes.Equal(g, w) {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}
