package k8s

import (
	"strings"
	"testing"
)

// TestDecodeConfig checks that each bad attribute gets a diagnostic naming
// it, and that the defaults are those documented.
func TestDecodeConfig(t *testing.T) {
	for _, tc := range []struct {
		name, hcl string
		attr      string // "" when valid
		detail    string
	}{
		{"minimal", `{"image":"python:3"}`, "", ""},
		{"no image", `{}`, "image", "needs image"},
		{"unknown attribute", `{"image":"python:3","imagee":"x"}`, "imagee", "no attribute"},
		{"wrong type", `{"image":"python:3","warm_pool":"two"}`, "warm_pool", "want int64"},
		{"both credentials", `{"image":"python:3","in_cluster":true,"kubeconfig":"/k"}`, "in_cluster", "not both"},
		{"bad namespace", `{"image":"python:3","namespace":"Team_A"}`, "namespace", "not a Kubernetes name"},
		{"bad runtime class", `{"image":"python:3","runtime_class_name":"gVisor"}`, "runtime_class_name", "not a Kubernetes name"},
		{"negative pool", `{"image":"python:3","warm_pool":-1}`, "warm_pool", "between 0 and 100"},
		{"shared without claim", `{"image":"python:3","workspace_volume":"shared"}`, "workspace_claim", "needs workspace_claim"},
		{"claim without volume", `{"image":"python:3","workspace_claim":"ws"}`, "workspace_claim", "only used with"},
		{"bad volume", `{"image":"python:3","workspace_volume":"nfs"}`, "workspace_volume", `"nfs"`},
		{"per-tenant prefix", `{"image":"python:3","workspace_volume":"pvc_per_tenant","workspace_claim":"ws-"}`, "", ""},
		{"bad timeout", `{"image":"python:3","ready_timeout":"soon"}`, "ready_timeout", "positive duration"},
		{"root", `{"image":"python:3","run_as_uid":0}`, "run_as_uid", "never run as root"},
		{"bad network isolation", `{"image":"python:3","network_isolation":"iptables"}`, "network_isolation", `"iptables": use "link_down"`},
		{"policy isolation", `{"image":"python:3","network_isolation":"policy"}`, "", ""},
		{"relative python", `{"image":"python:3","python":"python3"}`, "python", "absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, diags := decodeConfig([]byte(tc.hcl))
			if tc.attr == "" {
				if diags.HasErrors() {
					t.Fatalf("diagnostics: %v", diags)
				}
				if s.namespace != "default" || s.warmPool != 1 || s.owner != "cexecd" || s.runAs != 65534 || s.limits.memory != 512<<20 ||
					(s.netIsolation != isolationLinkDown && !strings.Contains(tc.hcl, "network_isolation")) {
					t.Errorf("defaults = %+v", s)
				}
				return
			}
			for _, d := range diags {
				if d.Attribute == tc.attr && strings.Contains(d.Summary+" "+d.Detail, tc.detail) {
					return
				}
			}
			t.Errorf("diagnostics %v lack one on %s saying %q", diags, tc.attr, tc.detail)
		})
	}
}
