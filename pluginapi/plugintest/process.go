package plugintest

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
)

// Build compiles the main package in dir (for a plugin's own test, ".") into
// a temporary folder of t and returns the binary's path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plugin")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	return out
}

// Process is a plugin binary started as cexecd starts it.
type Process struct {
	// Client is go-plugin's handle on the process: NegotiatedVersion, Kill.
	Client *plugin.Client
	// Plugin is what the process dispensed for its kind: a selector.Selector,
	// codegen.Codegen, guard.Guard or sandbox.Sandbox.
	Plugin any
	logs   *testutil.Buffer
}

// Logs is everything the host side logged, the plugin's stderr included.
func (p *Process) Logs() string { return p.logs.String() }

// Launch starts the plugin binary at path the way cexecd does — go-plugin's
// handshake, gRPC only, AutoMTLS, an environment of env alone (not the
// test's) with the plugin's log level at debug — and dispenses it as kind,
// through p (e.g. &guard.GRPCPlugin{}). The process is killed when the test
// ends.
func Launch(t testing.TB, path string, kind pluginapi.Kind, p plugin.Plugin, env ...string) *Process {
	t.Helper()
	logs := &testutil.Buffer{}
	cmd := exec.Command(path)
	cmd.Env = append([]string{pluginapi.LogLevelEnv + "=debug"}, env...)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginapi.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{pluginapi.ProtocolVersion: {string(kind): p}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		// go-plugin writes the host's log output from its own goroutines.
		Logger: hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Debug}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start plugin %s: %v\nlogs:\n%s", path, err, logs)
	}
	raw, err := rpc.Dispense(string(kind))
	if err != nil {
		t.Fatalf("dispense %s plugin: %v\nlogs:\n%s", kind, err, logs)
	}
	return &Process{Client: client, Plugin: raw, logs: logs}
}
