package bwrap_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestPlantedModules checks that modules an execution leaves in the
// workspace do not replace the standard library's or a server's stubs in
// later executions, while a tenant's skill still wins over a shared one of
// the same name.
func TestPlantedModules(t *testing.T) {
	sb := backend(t, `{}`)
	servers, shared := t.TempDir(), t.TempDir()
	files := map[string]string{
		filepath.Join(servers, "memory", "__init__.py"): "from cexec import call_tool\n\ndef read_graph():\n    return call_tool('memory', 'read_graph', {})\n",
		filepath.Join(shared, "clash", "__init__.py"):   "WHO = 'shared'\n",
	}
	for p, body := range files {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
	id, ws := box(t, sb, sandbox.Limits{},
		sandbox.Mount{Source: servers, Target: "/cexec/servers", ReadOnly: true},
		sandbox.Mount{Source: shared, Target: "/cexec/skills", ReadOnly: true})
	must(t, os.MkdirAll(filepath.Join(ws, "skills", "clash"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "skills", "clash", "__init__.py"), []byte("WHO = 'tenant'\n"), 0o644))

	graph := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"graph"`), nil
	}
	plant := `import os
os.makedirs("servers/memory", exist_ok=True)
for name, body in [("statistics.py", "PLANTED = 1\n"), ("servers/__init__.py", "PLANTED = 1\n"),
                   ("servers/memory/__init__.py", "def read_graph():\n    return 'planted'\n")]:
    with open(name, "w") as f:
        f.write(body)
print("planted")
`
	use := `import statistics
from servers.memory import read_graph
from skills.clash import WHO
print(statistics.mean([1, 2]), hasattr(statistics, "PLANTED"), read_graph(), WHO)
`
	for _, step := range []struct{ name, code, want string }{
		{"plant", plant, "planted\n"},
		{"use", use, "1.5 False graph tenant\n"},
	} {
		h := &plugintest.Host{OnCall: graph}
		if res := run(t, sb, id, step.code, h); res.ExitCode != 0 || h.Stdout() != step.want {
			t.Errorf("%s: stdout %q, want %q (error %+v, stderr %q)", step.name, h.Stdout(), step.want, res.Error, h.Stderr())
		}
	}
}
