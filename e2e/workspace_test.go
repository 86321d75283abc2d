package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// workspaceSetup is a setup whose daemon shares the repository's skills/
// and declares tenant "capped" with a small disk quota and session log.
func workspaceSetup(t *testing.T) setup {
	t.Helper()
	s := newSetup(t)
	skills, err := filepath.Abs("../skills")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), "cexec {\n", fmt.Sprintf("cexec {\n  skills_dir = %q\n", skills), 1)
	cfg += "\ntenant \"capped\" {\n  disk_quota = \"1MiB\"\n  max_session_log = \"64KiB\"\n}\n"
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// requireSandbox skips the test when the daemon has no working sandbox
// backend (the bwrap plugin not built, or no user namespaces here).
func requireSandbox(t *testing.T, s setup) {
	t.Helper()
	if p, ok := listPlugins(t, s)["sandbox/bwrap"]; !ok || p.Status != "ok" {
		testutil.SkipMissing(t, "no running sandbox backend (sandbox/bwrap: %+v)", p)
	}
	out, errOut, code := ctl(t, s, "exec", "-c", "print('sandbox ok')")
	if code != 0 || out != "sandbox ok\n" {
		testutil.SkipMissing(t, "sandboxed execution does not work here: exit %d\n%s%s", code, out, errOut)
	}
}

// run is cexecctl with optional stdin, returning an error instead of
// failing the test, so that goroutines may use it.
func run(s setup, stdin string, args ...string) (stdout, stderr string, code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), args...)
	cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+s.sock, "CEXEC_TENANT=")
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return o.String(), e.String(), ee.ExitCode(), nil
	}
	if err != nil {
		return o.String(), e.String(), -1, err
	}
	return o.String(), e.String(), 0, nil
}

// must is run that fails the test unless cexecctl exits 0.
func must(t *testing.T, s setup, stdin string, args ...string) string {
	t.Helper()
	out, errOut, code, err := run(s, stdin, args...)
	if err != nil || code != 0 {
		t.Fatalf("cexecctl %v: exit %d, %v\nstdout: %s\nstderr: %s", args, code, err, out, errOut)
	}
	return out
}

// fails runs cexecctl, expecting exit code want and wantErr in stderr.
func fails(t *testing.T, s setup, want int, wantErr string, args ...string) {
	t.Helper()
	out, errOut, code, err := run(s, "", args...)
	if err != nil || code != want || !strings.Contains(errOut, wantErr) {
		t.Errorf("cexecctl %v: exit %d (%v), want %d with %q\nstdout: %s\nstderr: %s", args, code, err, want, wantErr, out, errOut)
	}
	// The daemon's message is shown in words, not as a gRPC status.
	if strings.Contains(errOut, "rpc error") {
		t.Errorf("cexecctl %v: raw gRPC status on stderr: %s", args, errOut)
	}
}

func decode[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, out)
	}
	return v
}

type stateList struct {
	States []struct {
		Name   string `json:"name"`
		Bytes  string `json:"bytes"`
		Format string `json:"format"`
	} `json:"states"`
}

func (l stateList) names() []string {
	var out []string
	for _, s := range l.States {
		out = append(out, s.Name)
	}
	return out
}

type sessionList struct {
	Sessions []struct {
		ID             string `json:"id"`
		Entries        string `json:"entries"`
		Executions     string `json:"executions"`
		Checkpoints    string `json:"checkpoints"`
		LastCheckpoint string `json:"last_checkpoint"`
	} `json:"sessions"`
}

type logEntry struct {
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	Code   string `json:"code"`
	Step   string `json:"step"`
	Skill  string `json:"skill"`
	Result *struct {
		OK     bool   `json:"ok"`
		Output string `json:"output"`
	} `json:"result"`
	Context    json.RawMessage `json:"context"`
	StateFiles []string        `json:"state_files"`
}

type sessionShow struct {
	Entries []logEntry `json:"entries"`
	Skipped int        `json:"skipped"`
}

type skillList struct {
	Skills []struct {
		Name   string `json:"name"`
		Shared bool   `json:"shared"`
		Import string `json:"import"`
	} `json:"skills"`
}

type resumeOut struct {
	Session struct {
		ID          string   `json:"id"`
		Executions  int      `json:"executions"`
		Checkpoints int      `json:"checkpoints"`
		StateFiles  []string `json:"state_files"`
	} `json:"session"`
	Checkpoint logEntry   `json:"checkpoint"`
	Recent     []logEntry `json:"recent"`
}

type benchStateOut struct {
	Bytes    int `json:"bytes"`
	SaveLoad struct {
		N   int     `json:"n"`
		P50 float64 `json:"p50_ms"`
	} `json:"save_load"`
	ListSessions struct {
		N int `json:"n"`
	} `json:"list_sessions"`
	Sessions int `json:"sessions"`
}

// tenantList is `tenants ls --json` (protojson: int64 as strings).
type tenantList struct {
	Tenants []struct {
		ID        string `json:"id"`
		Declared  bool   `json:"declared"`
		DiskBytes string `json:"disk_bytes"`
		DiskMode  string `json:"disk_mode"`
	} `json:"tenants"`
}

func (l skillList) find(name string) (shared bool, ok bool) {
	for _, s := range l.Skills {
		if s.Name == name {
			return s.Shared, true
		}
	}
	return false, false
}

// TestWorkspaces drives one real cexecd through the scenario below.
// It is long because one daemon serves every subtest, and they build on the
// state, sessions and skills the earlier ones wrote.
func TestWorkspaces(t *testing.T) {
	s := workspaceSetup(t)
	startDaemon(t, s)
	requireSandbox(t, s)
	in := filepath.Join(s.dir, "in")
	if err := os.MkdirAll(in, 0o700); err != nil {
		t.Fatal(err)
	}
	progress := `{"page": 3, "seen": ["a", "b"]}`
	conf := "name: demo\nlimits:\n  rows: 10\n"
	if err := os.WriteFile(filepath.Join(in, "progress.json"), []byte(progress), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("state round trip", func(t *testing.T) {
		must(t, s, "", "state", "put", "progress.json", filepath.Join(in, "progress.json"))
		// From stdin, the name's extension says YAML.
		must(t, s, conf, "state", "put", "conf.yaml", "-")
		// JSON input for a YAML name is converted; from stdin the input is
		// taken to be in the name's format (JSON is YAML too).
		if err := os.WriteFile(filepath.Join(in, "conv.json"), []byte(`{"b": 2, "a": [1]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		must(t, s, "", "state", "put", "conv.yml", filepath.Join(in, "conv.json"))
		must(t, s, `{"raw": true}`, "state", "put", "raw.yaml")
		if got := must(t, s, "", "state", "get", "raw.yaml"); got != `{"raw": true}`+"\n" {
			t.Errorf("get raw.yaml = %q", got)
		}
		must(t, s, "", "state", "rm", "raw.yaml")
		if got := must(t, s, "", "state", "get", "progress.json"); got != progress+"\n" {
			t.Errorf("get progress.json = %q", got)
		}
		if got := must(t, s, "", "state", "get", "conf.yaml"); got != conf {
			t.Errorf("get conf.yaml = %q", got)
		}
		if got := decode[map[string]any](t, must(t, s, "", "state", "get", "conf.yaml", "--json")); fmt.Sprint(got) != "map[limits:map[rows:10] name:demo]" {
			t.Errorf("get conf.yaml --json = %v", got)
		}
		if got := must(t, s, "", "state", "get", "conv.yml"); got != "b: 2\na:\n  - 1\n" {
			t.Errorf("get conv.yml = %q", got)
		}
		ls := decode[stateList](t, must(t, s, "", "state", "ls", "--json"))
		if got := strings.Join(ls.names(), " "); got != "conf.yaml conv.yml progress.json" || ls.States[0].Format != "yaml" {
			t.Errorf("state ls = %+v", ls)
		}
		if out := must(t, s, "", "state", "ls"); !strings.Contains(out, "progress.json") || !strings.HasPrefix(out, "NAME") {
			t.Errorf("state ls table:\n%s", out)
		}
		must(t, s, "", "state", "rm", "conv.yml")
		fails(t, s, 1, "not found", "state", "get", "conv.yml")
		fails(t, s, 1, "not found", "state", "rm", "conv.yml")
		fails(t, s, 1, "invalid state name", "state", "put", "../escape.json", filepath.Join(in, "progress.json"))
		fails(t, s, 1, "not valid JSON", "state", "put", "bad.json", "-")
		fails(t, s, 2, "name it", "state", "put", "x.json", filepath.Join(in, "x.yaml"))
		// A name ending in another extension is refused, not saved as x.txt.json;
		// one with none is completed, and the output says so.
		fails(t, s, 2, "name it x.json or x.yaml", "state", "put", "x.txt", filepath.Join(in, "progress.json"))
		if out := must(t, s, `{"n": 1}`, "state", "put", "plain"); !strings.HasPrefix(out, "saved plain as plain.json (") {
			t.Errorf("state put plain: %q", out)
		}
		must(t, s, "", "state", "rm", "plain.json")
		// Over the declared tenant's quota nothing is written.
		big := `"` + strings.Repeat("x", 1100<<10) + `"`
		if _, errOut, code, _ := run(s, big, "state", "put", "big.json", "--tenant", "capped"); code != 1 || !strings.Contains(errOut, "quota") {
			t.Errorf("put over quota: exit %d %s", code, errOut)
		}
		if ls := decode[stateList](t, must(t, s, "", "state", "ls", "--tenant", "capped", "--json")); len(ls.States) != 0 {
			t.Errorf("after a refused put: %v", ls.names())
		}
	})

	t.Run("sandbox sees the same state files", func(t *testing.T) {
		code := `import cexec, json, os
with open("/workspace/state/progress.json") as f:
    print(json.load(f)["page"], cexec.get_state("progress.json")["seen"], cexec.get_state("conf.yaml")["limits"]["rows"])
with open("/workspace/state/fromcode.json", "w") as f:
    json.dump({"written": "by code"}, f)
cexec.save_state("api.yaml", {"via": "save_state", "n": [1, 2]})
print(cexec.get_state("missing.json", default="fallback"))
try:
    cexec.get_state("missing.json")
except KeyError:
    print("KeyError")
`
		if out := must(t, s, "", "exec", "-c", code); out != "3 ['a', 'b'] 10\nfallback\nKeyError\n" {
			t.Errorf("exec output %q", out)
		}
		if got := must(t, s, "", "state", "get", "fromcode.json"); got != `{"written": "by code"}`+"\n" {
			t.Errorf("file written by code, read by the CLI: %q", got)
		}
		if got := must(t, s, "", "state", "get", "api.yaml"); got != "via: save_state\nn:\n  - 1\n  - 2\n" {
			t.Errorf("save_state from code, read by the CLI: %q", got)
		}
	})

	t.Run("checkpoint and resume", func(t *testing.T) {
		code := `import cexec
cexec.checkpoint("fetched", {"page": 7, "cursor": "abc"})
cexec.save_state("work.json", {"done": 7})
print(cexec.checkpoint("saved"))
`
		if out := must(t, s, "", "exec", "--session", "work1", "-c", code); out != "2\n" {
			t.Errorf("exec output %q", out)
		}
		must(t, s, "", "sessions", "checkpoint", "work1", "reviewed", "--context", `{"by": "operator"}`)
		r := decode[resumeOut](t, must(t, s, "", "sessions", "resume", "work1", "--json"))
		if r.Session.ID != "work1" || r.Session.Executions != 1 || r.Session.Checkpoints != 3 || !slices.Equal(r.Session.StateFiles, []string{"work.json"}) {
			t.Errorf("resume summary %+v", r.Session)
		}
		if r.Checkpoint.Step != "reviewed" || compact(r.Checkpoint.Context) != `{"by":"operator"}` || r.Checkpoint.Seq != 4 {
			t.Errorf("last checkpoint %+v", r.Checkpoint)
		}
		if len(r.Recent) != 4 || r.Recent[0].Step != "fetched" || compact(r.Recent[0].Context) != `{"page":7,"cursor":"abc"}` || r.Recent[2].Kind != "execution" {
			t.Errorf("recent entries %+v", r.Recent)
		}
		text := must(t, s, "", "sessions", "resume", "work1")
		for _, want := range []string{"session work1: 4 entries, 1 executions (0 failed), 3 checkpoints", "last checkpoint: #4 reviewed", `"by": "operator"`, "#1 ", "fetched"} {
			if !strings.Contains(text, want) {
				t.Errorf("sessions resume lacks %q:\n%s", want, text)
			}
		}
	})

	t.Run("sessions ls after several execs", func(t *testing.T) {
		for i := range 3 {
			must(t, s, "", "exec", "--session", "multi", "-c", fmt.Sprintf("print(%d)", i))
		}
		before := decode[sessionList](t, must(t, s, "", "sessions", "ls", "--json"))
		must(t, s, "", "exec", "-c", "print('a session of its own')")
		after := decode[sessionList](t, must(t, s, "", "sessions", "ls", "--json"))
		if len(after.Sessions) != len(before.Sessions)+1 {
			t.Errorf("an exec without --session made %d new sessions", len(after.Sessions)-len(before.Sessions))
		}
		found := false
		for _, ss := range after.Sessions {
			if ss.ID == "multi" {
				found = ss.Executions == "3" && ss.Entries == "3"
			}
		}
		if !found {
			t.Errorf("session multi missing or wrong: %+v", after)
		}
		show := decode[sessionShow](t, must(t, s, "", "sessions", "show", "multi", "--json"))
		if len(show.Entries) != 3 || show.Skipped != 0 || show.Entries[2].Code != "print(2)" || show.Entries[2].Result == nil || show.Entries[2].Result.Output != "2\n" {
			t.Errorf("sessions show multi: %+v", show)
		}
		if out := must(t, s, "", "sessions", "show", "multi"); !strings.Contains(out, "#3 ") || !strings.Contains(out, "code:   print(2)") {
			t.Errorf("sessions show text:\n%s", out)
		}
		fails(t, s, 1, "not found", "sessions", "show", "no-such-session")
	})

	t.Run("skills", func(t *testing.T) {
		code := `import cexec
cexec.save_skill("shouter", "Upper-case text and add an exclamation mark", "def shout(text: str) -> str:\n    \"\"\"Shout text.\"\"\"\n    return text.upper() + '!'\n")
try:
    cexec.save_skill("broken", "does not compile", "def f(:\n")
except SyntaxError as e:
    print("SyntaxError", "line 1" in str(e))
`
		if out := must(t, s, "", "exec", "--session", "skilled", "-c", code); out != "SyntaxError True\n" {
			t.Errorf("save_skill output %q", out)
		}
		code = `from skills.shouter import shout
from skills.csv_report import summarize
from skills.json_query import get
print(shout("hi"), summarize("a,b\n1,2\n3,4\n")["rows"], get({"x": {"y": 5}}, "x.y"))
import servers
print(list(servers.__path__))
`
		if out := must(t, s, "", "exec", "-c", code); out != "HI! 2 5\n['/cexec/servers']\n" {
			t.Errorf("importing skills: %q", out)
		}
		ls := decode[skillList](t, must(t, s, "", "skills", "ls", "--json"))
		if shared, ok := ls.find("shouter"); !ok || shared {
			t.Errorf("skills ls lacks the tenant's shouter: %+v", ls)
		}
		for _, name := range []string{"csv_report", "json_query", "text_diff"} {
			if shared, ok := ls.find(name); !ok || !shared {
				t.Errorf("skills ls lacks shared %s: %+v", name, ls)
			}
		}
		if _, ok := ls.find("broken"); ok {
			t.Error("a skill that does not compile was saved")
		}
		if out := must(t, s, "", "skills", "show", "shouter"); !strings.Contains(out, "from skills.shouter import") || !strings.Contains(out, "return text.upper() + '!'") {
			t.Errorf("skills show:\n%s", out)
		}
		show := decode[sessionShow](t, must(t, s, "", "sessions", "show", "skilled", "--json"))
		if len(show.Entries) != 2 || show.Entries[0].Kind != "skill" || show.Entries[0].Skill != "shouter" {
			t.Errorf("session log of the skill save: %+v", show.Entries)
		}
		// From the CLI, then importable too.
		src := filepath.Join(in, "adder.py")
		if err := os.WriteFile(src, []byte("def add(a, b):\n    return a + b\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		must(t, s, "", "skills", "save", "adder", "--description", "Add two numbers", src)
		if out := must(t, s, "", "exec", "-c", "from skills.adder import add\nprint(add(2, 3))"); out != "5\n" {
			t.Errorf("skill saved by the CLI: %q", out)
		}
		fails(t, s, 1, "shared skill", "skills", "save", "csv_report", "--description", "clash", src)
		fails(t, s, 2, "--description", "skills", "save", "nodesc", src)
	})

	t.Run("tenant isolation", func(t *testing.T) {
		b := []string{"--tenant", "beta"}
		fails(t, s, 1, "no tenant beta", append([]string{"state", "get", "progress.json"}, b...)...)
		if ls := decode[stateList](t, must(t, s, "", append([]string{"state", "ls", "--json"}, b...)...)); len(ls.States) != 0 {
			t.Errorf("beta lists state %v", ls.names())
		}
		fails(t, s, 1, "no tenant beta", append([]string{"state", "rm", "progress.json"}, b...)...)
		fails(t, s, 1, "no tenant beta", append([]string{"sessions", "show", "work1"}, b...)...)
		fails(t, s, 1, "no tenant beta", append([]string{"sessions", "resume", "work1"}, b...)...)
		fails(t, s, 1, "skill shouter: not found", append([]string{"skills", "show", "shouter"}, b...)...)
		if ls := decode[sessionList](t, must(t, s, "", append([]string{"sessions", "ls", "--json"}, b...)...)); len(ls.Sessions) != 0 {
			t.Errorf("beta lists sessions %+v", ls)
		}
		if ls := decode[skillList](t, must(t, s, "", append([]string{"skills", "ls", "--json"}, b...)...)); len(ls.Skills) != 3 {
			t.Errorf("beta's skills should be the 3 shared ones: %+v", ls)
		}
		// The same from beta's sandboxed code: its /workspace is its own,
		// nothing of default's is reachable by path or by API.
		code := fmt.Sprintf(`import cexec, os
print(sorted(os.listdir("/workspace/state")), os.path.exists(%q))
try:
    cexec.get_state("progress.json")
except KeyError:
    print("no state")
try:
    from skills.shouter import shout
except ImportError:
    print("no skill")
try:
    cexec.get_state("../../default/workspace/state/progress.json")
except ValueError:
    print("bad name")
cexec.save_state("beta.json", {"mine": True})
`, filepath.Join(s.dir, "data"))
		if out := must(t, s, "", append([]string{"exec", "-c", code}, b...)...); out != "[] False\nno state\nno skill\nbad name\n" {
			t.Errorf("beta's sandbox: %q", out)
		}
		fails(t, s, 1, "not found", "state", "get", "beta.json")
		if got := must(t, s, "", append([]string{"state", "get", "beta.json"}, b...)...); got != `{"mine":true}`+"\n" {
			t.Errorf("beta's own state: %q", got)
		}
		fails(t, s, 1, "invalid tenant id", "state", "ls", "--tenant", "../default")
	})

	t.Run("bench state", func(t *testing.T) {
		r := decode[benchStateOut](t, must(t, s, "", "bench", "state", "--n", "5", "--list", "2", "--json"))
		if r.Bytes < 100_000 || r.SaveLoad.N != 5 || r.SaveLoad.P50 <= 0 || r.ListSessions.N != 2 || r.Sessions < 5 {
			t.Errorf("bench state: %+v", r)
		}
		for _, n := range decode[stateList](t, must(t, s, "", "state", "ls", "--json")).names() {
			if strings.HasPrefix(n, "bench-state-") {
				t.Errorf("bench state left %s behind", n)
			}
		}
	})

	t.Run("tenants", func(t *testing.T) {
		r := decode[tenantList](t, must(t, s, "", "tenants", "ls", "--json"))
		ids := map[string]bool{}
		for _, tn := range r.Tenants {
			ids[tn.ID] = tn.Declared
		}
		if !ids["capped"] || ids["beta"] || ids["default"] {
			t.Errorf("tenants: %+v", r.Tenants)
		}
		if _, ok := ids["beta"]; !ok {
			t.Errorf("tenants lacks beta: %+v", r.Tenants)
		}
		// Everything was used just now: nothing is old enough.
		gc := decode[struct {
			Removed []struct{ ID string } `json:"removed"`
		}](t, must(t, s, "", "tenants", "gc", "--older-than", "1h", "--dry-run", "--json"))
		if len(gc.Removed) != 0 {
			t.Errorf("gc --dry-run would remove %+v", gc.Removed)
		}
		fails(t, s, 2, "positive", "tenants", "gc", "--older-than", "0s")
	})
}

// compact removes the indentation --json output adds.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
