package pluginhost

import (
	"os"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
)

// baseEnv names the daemon variables every plugin gets: enough to find
// programs, a home, a temp dir and a locale. Nothing else of the daemon's
// environment (API keys in particular) reaches a plugin unless its block
// lists it in env.
var baseEnv = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// defaultPath is PATH for plugins when the daemon has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// pluginEnv is the complete environment of a plugin process: baseEnv taken
// from the daemon and the host's log level (so plugins do not produce lines
// the host drops), overridden by the plugin block's env. go-plugin appends
// its handshake variables after these.
func pluginEnv(extra map[string]string, level hclog.Level) []string {
	vars := make(map[string]string, len(baseEnv)+len(extra)+1)
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	if _, ok := vars["PATH"]; !ok {
		vars["PATH"] = defaultPath
	}
	if level != hclog.NoLevel {
		vars[pluginapi.LogLevelEnv] = level.String()
	}
	for k, v := range extra {
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}
