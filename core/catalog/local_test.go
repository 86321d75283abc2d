package catalog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testutil"
)

// pythonScanner runs the scanner with the host's Python, unsandboxed: the
// tests here are about what the scanner reads, and the daemon's tests read
// local tools through a real sandbox backend.
type pythonScanner struct{}

func (pythonScanner) Scan(ctx context.Context, req ScanRequest) ([]byte, error) {
	return testutil.RunPython(ctx, req.Program(req.Dir), req.MaxOutput)
}

// localScanner returns the scanner the tests read local tools with.
func localScanner(t *testing.T) Scanner {
	t.Helper()
	testutil.NeedPython(t)
	return pythonScanner{}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShippedLocalTools reads the repository's own servers/ directory.
func TestShippedLocalTools(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "servers")
	c := start(t, Options{LocalServersDir: dir, Scanner: localScanner(t)})
	for _, tt := range []struct{ name, sig, doc string }{
		{"word_count", "word_count(text: str, *, top: int = 10, min_length: int = 1) -> dict[str, Any]", "Count the words of a text."},
		{"csv_summary", "csv_summary(text: str, *, delimiter: str | None = None, top: int = 3) -> dict[str, Any]", "Summarise CSV data"},
	} {
		tool, ok := c.Tool("textutils", tt.name)
		if !ok {
			t.Fatalf("textutils/%s missing; tools: %v", tt.name, c.Tools())
		}
		if tool.Stub.Signature != tt.sig || !strings.HasPrefix(tool.Description, tt.doc) {
			t.Errorf("%s: signature %q, doc %q", tt.name, tool.Stub.Signature, tool.Description)
		}
		if tool.Stub.Import != "from servers.textutils import "+tt.name || tool.Local == nil ||
			tool.Local.File != filepath.Join(dir, "textutils", "__init__.py") || !strings.Contains(tool.Local.Source, "def "+tt.name+"(") {
			t.Errorf("%s: stub %+v local %+v", tt.name, tool.Stub, tool.Local)
		}
		if src, _ := c.StubSource(tool.ID); !strings.HasPrefix(string(src), "def "+tt.name) {
			t.Errorf("StubSource: %q", src)
		}
	}
	if _, ok := c.Tool("textutils", "_numbers"); ok {
		t.Error("private helper listed as a tool")
	}
}

func TestLocalToolRules(t *testing.T) {
	scanner := localScanner(t)
	dir := filepath.Join(t.TempDir(), "servers")
	writeFiles(t, dir, map[string]string{
		"reports/__init__.py": "\"\"\"Reports.\"\"\"\n__all__ = ['monthly']\ndef monthly(year: int, month: int) -> str:\n    \"\"\"A monthly report.\"\"\"\n    return ''\ndef helper() -> None:\n    pass\n",
		"reports/charts.py":   "import os\nos.system('touch /tmp/pwned')  # never executed: the scanner only parses\n@staticmethod\ndef bar(values: list[float], /, *, width: int = 40) -> str:\n    \"\"\"Draw a bar chart.\"\"\"\n    return ''\nasync def fetch(url, *urls, retries=3, **kw):\n    pass\nclass Chart:\n    def draw(self): ...\n",
		"reports/_private.py": "def hidden(): pass\n",
		"reports/broken.py":   "def oops(:\n",
		"stubbed/__init__.py": stubgen.Marker + "\ndef generated(): pass\n",
		"notapkg/tool.py":     "def lonely(): pass\n",
		"memory/__init__.py":  "def shadowed(): pass\n",
	})
	// An mcp_server named memory: the local package of that name is skipped
	// (a configured server is not connected here; Start is not called).
	cfg := &config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}, MCPServers: []*config.MCPServer{{Name: "memory", Transport: config.TransportStdio, Command: "/bin/false"}}}
	c, err := New(cfg, Options{LocalServersDir: dir, ServersDir: "-", Scanner: scanner})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.RefreshLocal(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tool := range c.Tools() {
		ids = append(ids, tool.ID+" "+tool.Stub.Module)
	}
	want := []string{"reports/monthly servers.reports", "reports/bar servers.reports.charts", "reports/fetch servers.reports.charts"}
	if strings.Join(ids, "\n") != strings.Join(want, "\n") {
		t.Errorf("local tools:\n%s\nwant:\n%s", strings.Join(ids, "\n"), strings.Join(want, "\n"))
	}
	if bar, _ := c.Tool("reports", "bar"); bar.Stub.Signature != "bar(values: list[float], /, *, width: int = 40) -> str" || bar.Local.Line != 4 || !strings.HasPrefix(bar.Local.Source, "@staticmethod") {
		t.Errorf("bar: %+v %+v", bar.Stub, bar.Local)
	}
	if f, _ := c.Tool("reports", "fetch"); f.Stub.Signature != "async fetch(url, *urls, retries=3, **kw)" {
		t.Errorf("fetch: %q", f.Stub.Signature)
	}
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Error("the scanner executed module code")
	}
}

func TestLocalToolsNeedSandbox(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "servers")
	writeFiles(t, dir, map[string]string{"pkg/__init__.py": "def f(): pass\n"})
	cfg := &config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}}
	c, err := New(cfg, Options{LocalServersDir: dir, ServersDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.RefreshLocal(context.Background()); !errors.Is(err, ErrNoSandbox) {
		t.Fatalf("err = %v, want ErrNoSandbox", err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("Start must go on without local tools: %v", err)
	}
	if len(c.Tools()) != 0 {
		t.Errorf("tools read without a sandbox: %v", c.Tools())
	}
}

// TestSharedServersDir is the default layout: generated stubs and local
// tool packages side by side in one servers directory.
func TestSharedServersDir(t *testing.T) {
	scanner := localScanner(t)
	dir := filepath.Join(t.TempDir(), "servers")
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "servers", "textutils", "__init__.py"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"textutils/__init__.py": string(src)})
	c := start(t, Options{ServersDir: dir, Scanner: scanner}, memoryServer(t, t.TempDir()))

	if _, err := os.Stat(filepath.Join(dir, "memory", "read_graph.py")); err != nil {
		t.Errorf("stubs: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "textutils", "__init__.py")); string(got) != string(src) {
		t.Error("the local package was modified")
	}
	var local, generated int
	for _, tool := range c.Tools() {
		switch {
		case tool.Local != nil && tool.Server == "textutils":
			local++
		case tool.Local == nil && tool.Server == "memory":
			generated++
		default:
			t.Errorf("unexpected tool %s (local %v)", tool.ID, tool.Local != nil)
		}
	}
	if local != 2 || generated == 0 {
		t.Errorf("%d local and %d memory tools", local, generated)
	}
}

// TestLocalFile: local tools files are read inside the servers folder
// only; .. and symlinks that leave it are refused.
func TestLocalFile(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "servers")
	writeFiles(t, dir, map[string]string{"textutils/__init__.py": "def word_count(text): ...\n", "textutils/big.py": strings.Repeat("#", maxLocalFile+1)})
	writeFiles(t, base, map[string]string{"secret.py": "TOKEN = 'x'\n"})
	for link, target := range map[string]string{"textutils/out.py": "../../secret.py", "textutils/abs.py": filepath.Join(base, "secret.py"), "textutils/in.py": "__init__.py", "escape": ".."} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	c := start(t, Options{LocalServersDir: dir})
	tests := []struct {
		path, want string
		notExist   bool
	}{
		{path: "servers/textutils/__init__.py", want: "def word_count(text): ...\n"},
		{path: "servers/textutils/in.py", want: "def word_count(text): ...\n"},
		{path: "servers/textutils/missing.py", notExist: true},
		{path: "servers/textutils", notExist: true},
		{path: "servers/textutils/../../secret.py"},
		{path: "servers/textutils/out.py"},
		{path: "servers/textutils/abs.py"},
		{path: "servers/escape/secret.py"},
		{path: "servers/textutils/big.py"},
		{path: "textutils/__init__.py", notExist: true},
	}
	for _, tt := range tests {
		got, err := c.LocalFile(tt.path)
		switch {
		case tt.want != "":
			if err != nil || string(got) != tt.want {
				t.Errorf("%s: %q, %v", tt.path, got, err)
			}
		case err == nil:
			t.Errorf("%s: read %q, want it refused", tt.path, got)
		case tt.notExist != errors.Is(err, fs.ErrNotExist):
			t.Errorf("%s: %v, want not-exist %v", tt.path, err, tt.notExist)
		}
	}
}
