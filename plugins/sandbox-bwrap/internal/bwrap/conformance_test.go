package bwrap_test

import (
	"testing"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/plugins/sandbox-bwrap/internal/bwrap"
)

// conformanceBackend is a bwrap plugin with the default configuration,
// skipping where bubblewrap cannot make sandboxes.
func conformanceBackend(t *testing.T) sandbox.Sandbox {
	p := bwrap.New(nil)
	t.Cleanup(func() { _ = p.Close() })
	if diags, err := p.Configure(t.Context(), nil, sandbox.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}
	caps, err := p.Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !caps.Available {
		testutil.SkipMissing(t, "bubblewrap sandboxes are not available here: %s", caps.UnavailableReason)
	}
	return p
}

func TestConformance(t *testing.T) {
	plugintest.RunSandboxConformance(t, conformanceBackend)
}

func TestConformanceMultiplexed(t *testing.T) {
	plugintest.RunSandboxConformance(t, conformanceBackend, plugintest.Multiplexed())
}
