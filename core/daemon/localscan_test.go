package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/core/pluginhost/hosttest"
	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
)

// TestLocalToolsReadInSandbox reads the repository's local tools through the
// real bwrap backend plugin, launched by the plugin host as cexecd does.
func TestLocalToolsReadInSandbox(t *testing.T) {
	host, cfg := hosttest.Bwrap(t)
	log := testpeers.Logger(t, "", hclog.Warn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dir := filepath.Join(testutil.ModuleRoot(), "servers")
	cat, err := catalog.New(cfg, catalog.Options{Logger: log, ServersDir: "-", LocalServersDir: dir,
		Scanner: sandboxScanner{plugins: host, backend: "bwrap"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if err := cat.RefreshLocal(ctx); err != nil {
		t.Fatal(err)
	}
	tool, ok := cat.Tool("textutils", "word_count")
	if !ok || !strings.HasPrefix(tool.Stub.Signature, "word_count(text: str") || tool.Local.File != filepath.Join(dir, "textutils", "__init__.py") {
		t.Fatalf("textutils/word_count: %+v (found %v); tools %v", tool, ok, cat.Tools())
	}
	// The scanner's sandbox is gone once the scan returned.
	sb, err := host.Sandbox("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if live, err := sb.List(ctx); err != nil || len(live) != 0 {
		t.Errorf("sandboxes left after the scan: %v (%v)", live, err)
	}
}

// TestScanWithoutBackend: no configured or running backend is ErrNoSandbox,
// which the daemon logs and starts without local tools.
func TestScanWithoutBackend(t *testing.T) {
	cfg := &config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}}
	host := pluginhost.New(cfg, nil)
	req := catalog.ScanRequest{Dir: t.TempDir(), Program: func(string) string { return "" }}
	for _, s := range []sandboxScanner{{plugins: host}, {plugins: host, backend: "bwrap"}} {
		if _, err := s.Scan(context.Background(), req); !errors.Is(err, catalog.ErrNoSandbox) {
			t.Errorf("backend %q: err = %v, want ErrNoSandbox", s.backend, err)
		}
	}
}
