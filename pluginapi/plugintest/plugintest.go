// Package plugintest lets a plugin author test a plugin through real gRPC,
// in process: the implementation is served by go-plugin's gRPC server and the
// test talks to it through the same client adapter cexecd uses, so every
// request and response crosses the wire and every error goes through the
// status mapping.
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
func Selector(t testing.TB, impl selector.Selector) selector.Selector {
	t.Helper()
	return connect[selector.Selector](t, pluginapi.KindSelector, &selector.GRPCPlugin{Impl: impl})
}

// Codegen serves impl over in-process gRPC and returns the host-side client
// for it. The connection is closed when the test ends.
func Codegen(t testing.TB, impl codegen.Codegen) codegen.Codegen {
	t.Helper()
	return connect[codegen.Codegen](t, pluginapi.KindCodegen, &codegen.GRPCPlugin{Impl: impl})
}

// Guard serves impl over in-process gRPC and returns the host-side client
// for it. The connection is closed when the test ends.
func Guard(t testing.TB, impl guard.Guard) guard.Guard {
	t.Helper()
	return connect[guard.Guard](t, pluginapi.KindGuard, &guard.GRPCPlugin{Impl: impl})
}

// Sandbox serves impl over in-process gRPC and returns the host-side client
// for it. The connection is closed when the test ends. Use Host as the
// sandbox.Host of Exec calls.
func Sandbox(t testing.TB, impl sandbox.Sandbox) sandbox.Sandbox {
	t.Helper()
	return connect[sandbox.Sandbox](t, pluginapi.KindSandbox, &sandbox.GRPCPlugin{Impl: impl})
}

func connect[T any](t testing.TB, kind pluginapi.Kind, p plugin.Plugin) T {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{string(kind): p})
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
