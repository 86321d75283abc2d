package msb

import (
	"testing"

	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// fakeConformanceBackend is the plugin in CLI mode driving the fake msb:
// microVMs cannot boot here, so the conformance suite checks the plugin's
// side of the contract with guests that are local processes the fake
// bounds as a VM would (its memory is the sandbox's memory limit).
func fakeConformanceBackend(t *testing.T) sandbox.Sandbox {
	p := New(nil)
	t.Cleanup(func() { _ = p.Close() })
	if diags, err := p.Configure(t.Context(), fakeConfig(fakeHost(t), nil), sandbox.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}
	return p
}

func TestConformance_FakeMSB(t *testing.T) {
	plugintest.RunSandboxConformance(t, fakeConformanceBackend)
}

func TestConformanceMultiplexed_FakeMSB(t *testing.T) {
	plugintest.RunSandboxConformance(t, fakeConformanceBackend, plugintest.Multiplexed())
}
