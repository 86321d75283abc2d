// Package plugintest lets a plugin author test a plugin through real gRPC,
// in process: the implementation is served by go-plugin's gRPC server and the
// test talks to it through the same client adapter cexecd uses, so every
// request and response crosses the wire and every error goes through the
// status mapping. Multiplexed serves it the way a host using go-plugin's
// multiplexed gRPC broker does, and RunSandboxConformance is the behaviour
// every sandbox backend must show.
//
//	func TestSearch(t *testing.T) {
//		s := plugintest.Selector(t, mySelector{})
//		plugintest.CheckInfo(t, s, pluginapi.KindSelector)
//		resp, err := s.Search(t.Context(), selector.SearchRequest{Query: "read file"})
//		...
//	}
package plugintest

import (
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/selector"
)

// Selector serves impl over in-process gRPC and returns the host-side client
// for it. The connection is closed when the test ends.
func Selector(t testing.TB, impl selector.Selector, opts ...Option) selector.Selector {
	t.Helper()
	return connect[selector.Selector](t, pluginapi.KindSelector, &selector.GRPCPlugin{Impl: impl}, opts)
}

// Codegen serves impl over in-process gRPC and returns the host-side client
// for it. The connection is closed when the test ends.
func Codegen(t testing.TB, impl codegen.Codegen, opts ...Option) codegen.Codegen {
	t.Helper()
	return connect[codegen.Codegen](t, pluginapi.KindCodegen, &codegen.GRPCPlugin{Impl: impl}, opts)
}

// Guard serves impl over in-process gRPC and returns the host-side client
// for it. The connection is closed when the test ends.
func Guard(t testing.TB, impl guard.Guard, opts ...Option) guard.Guard {
	t.Helper()
	return connect[guard.Guard](t, pluginapi.KindGuard, &guard.GRPCPlugin{Impl: impl}, opts)
}

// Sandbox serves impl over in-process gRPC and returns the host-side client
// for it. The connection is closed when the test ends. Use Host as the
// sandbox.Host of Exec calls.
func Sandbox(t testing.TB, impl sandbox.Sandbox, opts ...Option) sandbox.Sandbox {
	t.Helper()
	return connect[sandbox.Sandbox](t, pluginapi.KindSandbox, &sandbox.GRPCPlugin{Impl: impl}, opts)
}

// Option changes how a plugin is served to the test.
type Option func(*options)

type options struct {
	multiplex bool
}

// Multiplexed serves the plugin in go-plugin's multiplexed gRPC broker mode,
// the one a host with ClientConfig.GRPCBrokerMultiplex starts plugins in
// (PLUGIN_MULTIPLEX_GRPC=true): every connection goes through one yamux
// session over the plugin's listener. A plugin must work in both modes.
func Multiplexed() Option {
	return func(o *options) { o.multiplex = true }
}

func connect[T any](t testing.TB, kind pluginapi.Kind, p plugin.Plugin, opts []Option) T {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	client, server := plugin.TestPluginGRPCConn(t, o.multiplex, map[string]plugin.Plugin{string(kind): p})
	t.Cleanup(func() {
		// Stop the server first: closing the client first would stop it
		// from the server's own shutdown handler, racing with this Stop.
		server.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(string(kind))
	if err != nil {
		t.Fatalf("dispense %s plugin: %v", kind, err)
	}
	v, ok := raw.(T)
	if !ok {
		t.Fatalf("dispense %s plugin: got %T", kind, raw)
	}
	return v
}
