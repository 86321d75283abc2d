package pluginapi

import (
	"os"
	"strings"
	"sync"

	"github.com/cexec/cexec/internal/localgrpc"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// LogLevelEnv names the environment variable that sets the level of Logger
// (trace, debug, info, warn, error). The host passes its own log level in it;
// when unset the level is info.
const LogLevelEnv = "CEXEC_PLUGIN_LOG_LEVEL"

// maxRecvMsgSize lifts gRPC's 4 MiB default for messages a plugin receives:
// a full catalog re-index can be larger than that.
const maxRecvMsgSize = 64 << 20

var (
	loggerOnce sync.Once
	logger     hclog.Logger
)

// Logger returns the logger plugins should use. It writes JSON to stderr,
// which go-plugin reads and re-logs in the host under the plugin's name.
// Never write logs to stdout: it carries the go-plugin handshake.
func Logger() hclog.Logger {
	loggerOnce.Do(func() {
		level := hclog.LevelFromString(strings.TrimSpace(os.Getenv(LogLevelEnv)))
		if level == hclog.NoLevel {
			level = hclog.Info
		}
		logger = hclog.New(&hclog.LoggerOptions{
			Level:      level,
			Output:     os.Stderr,
			JSONFormat: true,
		})
	})
	return logger
}

// Serve runs a plugin of the given kind until the host stops it. p is the
// kind's GRPCPlugin (use selector.Serve and friends rather than calling this
// directly). Serve speaks gRPC only, accepts the host's AutoMTLS certificate
// when the host enables it, and refuses to run when started by hand (outside
// a host, the handshake cookie is missing): it then prints a message and
// exits with status 1.
func Serve(kind Kind, p plugin.Plugin) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {string(kind): p},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, grpc.MaxRecvMsgSize(maxRecvMsgSize), traceServerOption())
			return plugin.DefaultGRPCServer(append(opts, localgrpc.ServerOptions()...))
		},
		Logger: Logger(),
	})
}
