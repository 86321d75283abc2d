package bridge

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil/zygotetest"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

const python = "/usr/bin/python3"

// execHost is the executor's side of one execution, reduced to what the
// bridge needs: output is collected, host calls go to the execution.
type execHost struct {
	plugintest.Host
	exec *Execution
}

// startZygote runs the runtime's zygote with the servers packages of the
// generated stub tree and the repository's local tools, under path.
func startZygote(t testing.TB, path ...string) *runtime.Runner {
	t.Helper()
	var servers []string
	for _, p := range path {
		servers = append(servers, filepath.Join(p, "servers"))
	}
	cfg := runtime.ZygoteConfig{Python: python, Path: path, Packages: map[string][]string{"servers": servers},
		Workdir: t.TempDir(), Preload: []string{}}
	return zygotetest.Start(t, cfg, runtime.Options{})
}

func run(t testing.TB, r *runtime.Runner, b *Bridge, code string) (sandbox.ExecResult, *execHost) {
	t.Helper()
	h := &execHost{exec: b.NewExecution(ExecOptions{})}
	h.OnCall = h.exec.HandleHostCall
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := r.Exec(ctx, sandbox.ExecRequest{Code: code, Timeout: 50 * time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("program failed: %s: %s\n%s\nstdout: %s", res.Error.Type, res.Error.Message, res.Error.Traceback, h.Stdout())
	}
	return res, h
}

// TestEndToEnd runs one program through the real runtime that lists and
// reads files through the filesystem server, filters them in Python, uses
// a local tool, stores entities in the memory server and reads them back.
func TestEndToEnd(t *testing.T) {
	f := newFixture(t, true)
	if _, ok := f.cat.Tool("textutils", "word_count"); !ok {
		t.Fatalf("local tool textutils/word_count missing; tools %v", f.cat.Tools())
	}
	for name, body := range map[string]string{
		"invoice-001.txt": "Invoice 001: 3 chairs for ACME, total 240 EUR",
		"invoice-002.txt": "Invoice 002: 1 table for Globex, total 410 EUR",
		"notes.txt":       "call the plumber on monday",
		"photo.png":       "not really a png",
	} {
		if err := os.WriteFile(filepath.Join(f.data, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := startZygote(t, filepath.Dir(f.stubs), repoRoot(t))
	code := `
import json
from servers.filesystem import list_directory, read_text_file
from servers.memory import create_entities, open_nodes
from servers.textutils import word_count

DATA = ` + pyString(f.data) + `
listing = list_directory(path=DATA)["content"]
invoices = sorted(line.split(" ", 1)[1] for line in listing.splitlines()
                  if line.startswith("[FILE]") and line.endswith(".txt") and "invoice" in line)
entities = []
for name in invoices:
    text = read_text_file(path=DATA + "/" + name)["content"]
    total = int(text.split("total ")[1].split()[0])
    entities.append({"name": name, "entityType": "invoice",
                     "observations": ["total %d EUR" % total, "words %d" % word_count(text)["words"]]})
create_entities(entities=entities)
graph = open_nodes(names=invoices)
print(json.dumps(sorted((e["name"], e["observations"]) for e in graph["entities"])))
`
	res, h := run(t, r, f.b, code)
	want := `[["invoice-001.txt", ["total 240 EUR", "words 9"]], ["invoice-002.txt", ["total 410 EUR", "words 9"]]]`
	if got := strings.TrimSpace(h.Stdout()); got != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %s", got, want, h.Stderr())
	}
	s := h.exec.Summary()
	if s.Calls != 5 || s.Failed != 0 || len(s.Tools) != 4 {
		t.Errorf("summary %+v (exit %d)", s, res.ExitCode)
	}
}

// TestEndToEndUpstreamKilled kills the upstream server while a program
// waits on it: the program gets a ToolError, and the next execution works.
func TestEndToEndUpstreamKilled(t *testing.T) {
	f := newFixture(t, false)
	r := startZygote(t, filepath.Dir(f.stubs))
	before, _ := f.cat.Server("everything")
	go func() {
		time.Sleep(time.Second)
		_ = syscall.Kill(before.PID, syscall.SIGKILL)
	}()
	_, h := run(t, r, f.b, `
from cexec import ToolError
from servers.everything import trigger_long_running_operation
try:
    trigger_long_running_operation(duration=30, steps=3)
    print("no error")
except ToolError as e:
    print(e.type, "|", e)
`)
	out := h.Stdout()
	if !strings.HasPrefix(out, TypeUnavailable+" | ") || !strings.Contains(out, "went away during the call") {
		t.Errorf("program saw: %q", out)
	}
	t.Logf("program saw: %s", strings.TrimSpace(out))

	_, h = run(t, r, f.b, "from servers.everything import echo\nprint(echo(message='after restart'))\n")
	if got := strings.TrimSpace(h.Stdout()); got != "Echo: after restart" {
		t.Errorf("next execution: %q", got)
	}
	if after, _ := f.cat.Server("everything"); after.PID == before.PID || after.Restarts != 1 {
		t.Errorf("server after the kill: %+v", after)
	}
}

// TestEndToEndOversizedArgument passes a 12 MiB argument to the memory
// reference server, which crashed it before arguments were capped: the
// program gets a ToolError naming the limit, and its next call on the same
// server succeeds.
func TestEndToEndOversizedArgument(t *testing.T) {
	f := newFixture(t, false)
	r := startZygote(t, filepath.Dir(f.stubs))
	before, _ := f.cat.Server("memory")
	_, h := run(t, r, f.b, `
from cexec import ToolError
from servers.memory import create_entities, read_graph
try:
    create_entities(entities=[{"name": "big", "entityType": "blob", "observations": ["x" * (12 << 20)]}])
    print("no error")
except ToolError as e:
    print(e.type, "|", e)
create_entities(entities=[{"name": "small", "entityType": "note", "observations": ["fits"]}])
print([e["name"] for e in read_graph()["entities"]])
`)
	out := strings.Split(strings.TrimSpace(h.Stdout()), "\n")
	if len(out) != 2 || !strings.HasPrefix(out[0], TypeArgumentTooLarge+" | memory/create_entities was not called: its arguments are 12.0 MiB, over the limit of 1 MiB per call (max_argument_size)") ||
		out[1] != "['small']" {
		t.Errorf("program saw: %q", h.Stdout())
	}
	if after, _ := f.cat.Server("memory"); after.PID != before.PID || after.Restarts != 0 {
		t.Errorf("the memory server restarted: before %+v, after %+v", before, after)
	}
	if s := h.exec.Summary(); s.Calls != 3 || s.Failed != 1 {
		t.Errorf("summary %+v", s)
	}
}

// pyString quotes s as a Python string literal.
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
