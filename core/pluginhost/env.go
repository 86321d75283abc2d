package pluginhost

import (
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/childenv"
	"github.com/cexec/cexec/pluginapi"
)

// pluginEnv is the complete environment of a plugin process: the daemon's
// allowlisted variables and the host's log level (so plugins do not produce
// lines the host drops), overridden by the plugin block's env. go-plugin
// appends its handshake variables after these.
func pluginEnv(extra map[string]string, level hclog.Level) []string {
	logLevel := map[string]string{}
	if level != hclog.NoLevel {
		logLevel[pluginapi.LogLevelEnv] = level.String()
	}
	return childenv.Build(os.LookupEnv, logLevel, extra)
}
