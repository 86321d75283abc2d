// Package hosttest starts real plugin binaries through the plugin host, as
// cexecd does, for the tests of core packages (a plugin's internal
// packages cannot be imported from core).
package hosttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
)

// Bwrap builds the bwrap sandbox plugin, starts it through a plugin host
// on a config of its own (no guards, a temporary data_dir) and returns the
// host, stopped when the test ends, and the config. It skips (fails under
// CI) where bubblewrap is missing. It changes the test's working
// directory to a temporary one, so that the host's relative defaults stay
// out of the source tree.
func Bwrap(t testing.TB) (*pluginhost.Host, *config.Config) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		testutil.SkipMissing(t, "bubblewrap: %v", err)
	}
	t.Chdir(t.TempDir())
	pluginDir := t.TempDir()
	if err := testutil.GoBuild(filepath.Join(pluginDir, "cexec-plugin-sandbox-bwrap"), "./plugins/sandbox-bwrap"); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("cexec {\n  plugin_dir = %q\n  data_dir   = %q\n}\n\nplugin \"sandbox\" \"bwrap\" {}\npipeline {\n  guards = []\n}\n", pluginDir, t.TempDir())
	cfgPath := filepath.Join(t.TempDir(), "cexec.hcl")
	if err := os.WriteFile(cfgPath, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(cfgPath, config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	host := pluginhost.New(cfg, testpeers.Logger(t, "", hclog.Warn))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { host.Stop(context.Background()) })
	if diags := host.Start(ctx); diags.HasErrors() {
		t.Fatalf("start the bwrap plugin: %s", diags.Error())
	}
	return host, cfg
}
