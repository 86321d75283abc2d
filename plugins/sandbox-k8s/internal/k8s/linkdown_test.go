package k8s

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestLinkDownPod checks the pod of a sandbox without network in each
// network_isolation mode: link_down adds the init container with NET_ADMIN
// alone, as root, without privilege escalation or a writable root, and the
// containers that stay have no capability; policy and a sandbox with
// network have no init container.
func TestLinkDownPod(t *testing.T) {
	linkDown := testSettings(t, `{"image":"python:3","allow_network":true}`)
	policy := testSettings(t, `{"image":"python:3","allow_network":true,"network_isolation":"policy"}`)
	pod := func(s *settings, network bool) (map[string]any, *podSpec) {
		t.Helper()
		p, _, err := s.checkRequest(sandbox.CreateRequest{ID: "a", Tenant: "acme", Network: network})
		if err != nil {
			t.Fatal(err)
		}
		return p.pod(), p
	}
	cut, cutSpec := pod(linkDown, false)
	checkLinkDown(t, cut)
	if _, p := pod(policy, false); p.linkDown {
		t.Errorf("policy mode: linkDown set")
	}
	for name, s := range map[string]*settings{"policy": policy, "network allowed": linkDown} {
		network := name == "network allowed"
		got, p := pod(s, network)
		if _, ok := got["initContainers"]; ok {
			t.Errorf("%s: init containers %v, want none", name, got["initContainers"])
		}
		if p.templateName("o") == cutSpec.templateName("o") {
			t.Errorf("%s: same template name as the link_down pod: the pools would mix", name)
		}
	}
	if tmpl := linkDown.template("cx-a", cutSpec); tmpl.Object["spec"].(map[string]any)["networkPolicyManagement"] != "Managed" {
		t.Errorf("link_down dropped the NetworkPolicy layer: %v", tmpl.Object["spec"])
	}
}

// checkLinkDown checks pod's init container: it alone has a capability,
// NET_ADMIN, as uid 0, with no privilege escalation and a read-only root.
func checkLinkDown(t *testing.T, pod map[string]any) {
	t.Helper()
	inits, _, _ := unstructured.NestedSlice(pod, "initContainers")
	if len(inits) != 1 {
		t.Fatalf("init containers %v, want the link-down one", inits)
	}
	c := inits[0].(map[string]any)
	sc := c["securityContext"].(map[string]any)
	caps := sc["capabilities"].(map[string]any)
	if c["name"] != linkDownName || sc["runAsUser"] != int64(0) || sc["runAsNonRoot"] != false ||
		sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || sc["privileged"] != nil ||
		!reflect.DeepEqual(caps["add"], []any{"NET_ADMIN"}) || !reflect.DeepEqual(caps["drop"], []any{"ALL"}) {
		t.Errorf("link-down container %s: securityContext %v", c["name"], sc)
	}
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	for _, c := range containers {
		c := c.(map[string]any)
		caps, _, _ := unstructured.NestedMap(c, "securityContext", "capabilities")
		if _, ok := caps["add"]; ok || !reflect.DeepEqual(caps["drop"], []any{"ALL"}) {
			t.Errorf("container %s capabilities %v, want all dropped and none added", c["name"], caps)
		}
	}
}
