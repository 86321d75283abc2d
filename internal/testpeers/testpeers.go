// Package testpeers finds the real, pinned MCP reference servers the tests
// run against (installed into test/peers by scripts/deps.sh) and gives tests
// a logger that writes through t.Log. It is for tests only.
package testpeers

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Dir is test/peers/node_modules/.bin of this repository.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "test", "peers", "node_modules", ".bin")
}

// Bin returns the path of the reference server's launcher (for example
// "mcp-server-filesystem"), skipping the test when node or the package is
// missing: scripts/deps.sh installs both, and CI runs it.
func Bin(t testing.TB, name string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; run scripts/deps.sh to test against the reference MCP servers")
	}
	p := filepath.Join(Dir(), name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed (%v); run scripts/deps.sh", name, err)
	}
	return p
}

// Logger logs through t.Log until the test ends; lines logged after that
// (by goroutines still winding down) are dropped, as t.Log would panic.
func Logger(t testing.TB, name string, level hclog.Level) hclog.Logger {
	w := &tlogWriter{t: t}
	t.Cleanup(w.stop)
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: w})
}

type tlogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tlogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tlogWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
