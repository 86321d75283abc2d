package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		from, imp string
		rule      string // "" when the import is allowed
	}{
		{"cmd/cexecd", "core/daemon", ""},
		{"core/pool", "pluginapi/sandbox", ""},
		{"core/pool", "internal/localgrpc", ""},
		{"core/pool", "api/cexec/v1", ""},
		{"core/daemon", "core/pool", ""},
		{"client", "api/cexec/v1", ""},
		{"client", "internal/localgrpc", ""},
		{"cmd/cexecctl/exec", "client", ""},
		{"plugins/guard-pii", "plugins/guard-pii/internal/pii", ""},
		{"plugins/guard-pii/internal/pii", "pluginapi/guard", ""},
		{"plugins/guard-pii", "internal/maxprocs", ""},
		{"examples/plugin-selector-keyword", "pluginapi/selector", ""},
		{"examples/walkthrough/11-local-tools", "client", ""},
		{"examples/walkthrough/11-local-tools", "api/cexec/v1", ""},
		{"pluginapi/sandbox", "internal/maxprocs", ""},
		{"api/cexec/v1", "api/defaults", ""},

		{"client", "core/config", "client imports only api and internal"},
		{"client", "pluginapi", "client imports only api and internal"},
		{"cmd/cexecctl/bench", "core/bridge", "cexecctl reaches the daemon only through client and api"},
		{"cmd/cexecctl/bench", "plugins/selector-embeddings/engine", "cexecctl reaches the daemon only through client and api"},
		{"cmd/cexecctl-bench", "core/pool", "cexecctl-bench (cexecctl bench) reaches the daemon only through client and api"},
		{"cmd/cexecctl-bench", "cmd/cexecctl/bench", ""},
		{"e2e", "core/mcpface", "nothing but cmd/cexecd imports core"},
		{"internal/version", "core/config", "internal helpers import no layer above them"},
		{"core/searcheval", "plugins/selector-embeddings/engine", "core imports pluginapi, api and internal, never plugins"},
		{"core/guard", "plugins/guard-pii/detect", "core imports pluginapi, api and internal, never plugins"},
		{"pluginapi/plugintest", "core/pool", "pluginapi imports nothing of the daemon"},
		{"plugins/guard-pii", "plugins/selector-embeddings/engine", "a plugin imports pluginapi, internal and its own packages only"},
		{"plugins/guard-pii", "cmd/cexecctl/cli", "a plugin imports pluginapi, internal and its own packages only"},
		{"examples/plugin-selector-keyword", "internal/localgrpc", "an example imports only the public API"},
		{"examples/walkthrough/11-local-tools", "core/catalog", "an example imports only the public API"},
		{"api/cexec/v1", "internal/localgrpc", "api imports nothing of the module but api"},
		{"internal/testutil", "plugins/guard-pii", "internal helpers import no layer above them"},
	} {
		t.Run(tc.from+"->"+tc.imp, func(t *testing.T) {
			got := check("m", []pkg{{path: tc.from, imports: []string{tc.imp}}})
			if tc.rule == "" {
				if len(got) != 0 {
					t.Fatalf("allowed import reported: %q", got)
				}
				return
			}
			if len(got) == 0 {
				t.Fatalf("forbidden import not reported (want rule %q)", tc.rule)
			}
			want := "m/" + tc.from + " imports m/" + tc.imp + ": "
			found := false
			for _, line := range got {
				if strings.HasPrefix(line, want) && strings.Contains(line, tc.rule) {
					found = true
				}
			}
			if !found {
				t.Fatalf("got %q, want a line starting %q naming rule %q", got, want, tc.rule)
			}
		})
	}
}

func TestCheckIgnoresSelfImport(t *testing.T) {
	if got := check("m", []pkg{{path: "client", imports: []string{"client"}}}); len(got) != 0 {
		t.Fatalf("got %q", got)
	}
}

// TestConfinedImports checks that the Kubernetes client libraries are
// reported outside plugins/sandbox-k8s only.
func TestConfinedImports(t *testing.T) {
	for _, tc := range []struct {
		from, imp string
		bad       bool
	}{
		{"plugins/sandbox-k8s/internal/k8s", "k8s.io/client-go/dynamic", false},
		{"plugins/sandbox-k8s/internal/k8s", "sigs.k8s.io/controller-runtime/pkg/envtest", false},
		{"core/pool", "k8s.io/client-go/kubernetes", true},
		{"plugins/sandbox-bwrap/internal/bwrap", "k8s.io/apimachinery/pkg/types", true},
		{"e2e", "sigs.k8s.io/controller-runtime/pkg/envtest", true},
		{"core/pool", "github.com/hashicorp/go-hclog", false},
	} {
		got := check("m", []pkg{{path: tc.from, external: []string{tc.imp}}})
		if bad := len(got) > 0; bad != tc.bad {
			t.Errorf("%s imports %s: reported %q, want reported %v", tc.from, tc.imp, got, tc.bad)
		}
		if tc.bad && len(got) > 0 && !strings.Contains(got[0], "only plugins/sandbox-k8s") {
			t.Errorf("%s imports %s: %q does not name the confinement", tc.from, tc.imp, got[0])
		}
	}
}
