package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestDefaultPathOrder(t *testing.T) {
	cfg := ZygoteConfig{}
	env := cfg.Env()
	for k, want := range map[string]string{
		"PYTHONPATH":     "/cexec/lib",
		"PYTHONSAFEPATH": "1",
		"CEXEC_PATH":     "/workspace:/cexec",
		"CEXEC_PACKAGES": "servers=/cexec/servers;skills=/workspace/skills:/cexec/skills",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	argv := cfg.Command()
	ws, shared := slices.Index(argv, "/workspace"), slices.Index(argv, "/cexec")
	if ws < 0 || shared < 0 || ws > shared || argv[ws-1] != "--path" || argv[shared-1] != "--path" {
		t.Errorf("zygote command %q: want --path /workspace before --path /cexec", argv)
	}
}

// TestDefaultPathImports runs a zygote whose path and packages are the
// defaults with /workspace and /cexec replaced by host folders laid out as
// in a sandbox: a tenant skill wins over a shared one of the same name, both
// kinds import from the one skills namespace, and servers comes from
// /cexec/servers. Modules a program plants in the workspace (statistics.py,
// servers/files/__init__.py, servers/__init__.py, sitecustomize.py) replace
// neither the standard library's nor the stubs in the next execution, nor in
// a Python subprocess of it.
func TestDefaultPathImports(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		testutil.SkipMissing(t, "no %s", python)
	}
	ws, shared := t.TempDir(), t.TempDir()
	files := map[string]string{
		filepath.Join(shared, "skills", "clash", "__init__.py"):  "WHO = 'shared'\n",
		filepath.Join(shared, "skills", "common", "__init__.py"): "def hello():\n    return 'shared hello'\n",
		filepath.Join(shared, "servers", "files", "__init__.py"): "from .read import read\n",
		filepath.Join(shared, "servers", "files", "read.py"):     "def read():\n    return 'stub'\n",
		filepath.Join(ws, "skills", "clash", "__init__.py"):      "WHO = 'tenant'\n",
		filepath.Join(ws, "skills", "mine", "__init__.py"):       "def mine():\n    return 'tenant only'\n",
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var path []string
	for _, p := range DefaultPath {
		switch p {
		case "/workspace":
			path = append(path, ws)
		case "/cexec":
			path = append(path, shared)
		default:
			t.Fatalf("DefaultPath has %q, which this test does not map", p)
		}
	}
	if !slices.Equal(DefaultPackages["skills"], []string{"/workspace/skills", "/cexec/skills"}) ||
		!slices.Equal(DefaultPackages["servers"], []string{"/cexec/servers"}) {
		t.Fatalf("DefaultPackages = %v, which this test does not map", DefaultPackages)
	}
	r := runZygote(t, Options{}, ZygoteConfig{Python: python, LibDir: libDir(t), Path: path,
		Packages: StandardPackages(ws, shared), Workdir: ws, Preload: []string{}})
	plant := `import os
os.makedirs("servers/files", exist_ok=True)
for name, body in [("statistics.py", "PLANTED = 1\\n"), ("servers/__init__.py", "PLANTED = 1\\n"),
                   ("sitecustomize.py", "raise SystemExit('planted')\\n"),
                   ("servers/files/__init__.py", "def read():\\n    return 'planted'\\n")]:
    with open(name, "w") as f:
        f.write(body)
`
	code := `import servers, skills, statistics
from skills.clash import WHO
from skills.common import hello
from skills.mine import mine
from servers.files import read
print(WHO, hello(), mine(), read(), sep='|')
print(list(servers.__path__) == [` + pyStr(filepath.Join(shared, "servers")) + `])
print(statistics.mean([1, 2]), hasattr(statistics, "PLANTED"))
`
	sub := `import subprocess, sys
code = "import statistics; from skills.clash import WHO; from servers.files import read; print(WHO, read(), hasattr(statistics, 'PLANTED'), sep='|')"
p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
print(p.stdout + p.stderr, end="")
`
	for _, step := range []struct{ name, code, want string }{
		{"plant", plant, ""},
		{"import", code, "tenant|shared hello|tenant only|stub\nTrue\n1.5 False\n"},
		{"subprocess", sub, "tenant|stub|False\n"},
	} {
		h := &recHost{}
		res := exec1(t, r, step.code, h)
		out, errOut := h.out()
		if res.ExitCode != 0 || out != step.want {
			t.Errorf("%s: stdout %q, want %q\nstderr %q result %+v", step.name, out, step.want, errOut, res)
		}
	}
}

func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestWorkspaceAPI checks that cexec.get_state, save_state, checkpoint and
// save_skill send the host calls the daemon serves, and surface its errors
// as the exceptions it names.
func TestWorkspaceAPI(t *testing.T) {
	r, _ := startZygote(t, Options{})
	var mu sync.Mutex
	var calls []string
	h := &recHost{fn: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		calls = append(calls, method+" "+string(params))
		mu.Unlock()
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(params, &p)
		switch {
		case method == "get_state" && p.Name == "missing.json" && !strings.Contains(string(params), `"default"`):
			return nil, &sandbox.CallError{Type: "KeyError", Message: "state missing.json: not found"}
		case method == "get_state" && p.Name == "missing.json":
			var d struct{ Default json.RawMessage }
			_ = json.Unmarshal(params, &d)
			return d.Default, nil
		case method == "get_state":
			return json.RawMessage(`{"page": 3}`), nil
		case method == "save_state" && p.Name == "big.json":
			return nil, &sandbox.CallError{Type: "QuotaExceeded", Message: "disk quota exceeded"}
		case method == "save_state":
			return json.RawMessage(`{"name": "p.json", "bytes": 10}`), nil
		case method == "checkpoint":
			return json.RawMessage(`{"session": "s", "seq": 7}`), nil
		case method == "save_skill" && p.Name == "bad":
			return nil, &sandbox.CallError{Type: "SyntaxError", Message: "line 1: invalid syntax"}
		case method == "save_skill":
			return json.RawMessage(`{"name": "shout", "import": "skills.shout", "path": "/workspace/skills/shout"}`), nil
		}
		return nil, &sandbox.CallError{Type: "HostError", Message: "unexpected " + method}
	}}
	code := `import cexec
print(cexec.get_state("p.json")["page"])
try:
    cexec.get_state("missing.json")
except KeyError as e:
    print("KeyError", e)
print(cexec.get_state("missing.json", default=None), cexec.get_state("missing.json", default=[1]))
print(cexec.save_state("p.json", {"page": 4})["bytes"])
try:
    cexec.save_state("big.json", "x")
except cexec.HostError as e:
    print("HostError", e.type)
print(cexec.checkpoint("fetched", {"page": 4}), cexec.checkpoint("done"))
print(cexec.save_skill("shout", "Shout", "def shout(s):\n    return s.upper()\n")["import"])
try:
    cexec.save_skill("bad", "d", "def (")
except SyntaxError as e:
    print("SyntaxError", e)
`
	res := exec1(t, r, code, h)
	out, errOut := h.out()
	want := "3\nKeyError 'state missing.json: not found'\nNone [1]\n10\nHostError QuotaExceeded\n7 7\nskills.shout\nSyntaxError line 1: invalid syntax\n"
	if res.ExitCode != 0 || out != want {
		t.Errorf("stdout %q, want %q\nstderr %q result %+v", out, want, errOut, res)
	}
	mu.Lock()
	defer mu.Unlock()
	wantCalls := []string{
		`get_state {"name":"p.json"}`,
		`get_state {"name":"missing.json"}`,
		`get_state {"name":"missing.json","default":null}`,
		`get_state {"name":"missing.json","default":[1]}`,
		`save_state {"name":"p.json","value":{"page":4}}`,
		`save_state {"name":"big.json","value":"x"}`,
		`checkpoint {"step":"fetched","context":{"page":4}}`,
		`checkpoint {"step":"done","context":null}`,
		`save_skill {"name":"shout","description":"Shout","code":"def shout(s):\n    return s.upper()\n"}`,
		`save_skill {"name":"bad","description":"d","code":"def ("}`,
	}
	if !slices.Equal(calls, wantCalls) {
		t.Errorf("host calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(wantCalls, "\n"))
	}
}
