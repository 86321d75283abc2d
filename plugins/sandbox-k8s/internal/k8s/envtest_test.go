package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// startAPIServer runs a real kube-apiserver and etcd (controller-runtime's
// envtest) with the agent-sandbox v0.5.6 CRDs installed. The binaries come
// from scripts/k8s-binaries.sh (make k8s-binaries builds them from the Go
// module proxy), or from $CEXEC_K8S_BIN. There is no node and no
// agent-sandbox controller: no pod ever runs, so this covers the plugin's
// control path only.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	dir := os.Getenv("CEXEC_K8S_BIN")
	if dir == "" {
		script := filepath.Join("..", "..", "..", "..", "scripts", "k8s-binaries.sh")
		out, err := exec.Command(script, "--dir").Output()
		if err != nil {
			t.Fatalf("%s --dir: %v", script, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			testutil.SkipMissing(t, "no %s in %s: run `make k8s-binaries` (builds kube-apiserver and etcd from the Go module proxy, about 11 minutes cold) or set CEXEC_K8S_BIN", b, dir)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		CRDDirectoryPaths:        []string{filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 3 * time.Minute, // two shared cores
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return cfg
}

func configured(t *testing.T, cfg *rest.Config, hcl map[string]any) *Plugin {
	t.Helper()
	p := New(nil)
	p.rest = cfg
	raw, _ := json.Marshal(hcl)
	diags, err := p.Configure(context.Background(), raw, sandbox.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", err, diags)
	}
	return p
}

func listOwned(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource, owner string) []unstructured.Unstructured {
	t.Helper()
	cl, err := newCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cl.dynamic.Resource(gvr).Namespace("default").List(context.Background(), metav1.ListOptions{LabelSelector: ownerSelector(owner)})
	if err != nil {
		t.Fatalf("list %s: %v", gvr.Resource, err)
	}
	return list.Items
}

// TestControlPathEnvtest drives the plugin against a real API server:
// leftovers of an earlier run are swept by label, Create makes the template,
// warm pool and claim with the tenant's volume, limits and labels, fails
// clearly when no controller binds the claim and leaves no claim behind,
// and a restarted plugin and Close delete the pools and templates.
func TestControlPathEnvtest(t *testing.T) {
	cfg := startAPIServer(t)
	ctx := context.Background()
	cl, err := newCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hcl := map[string]any{
		"namespace": "default", "image": "docker.io/library/python:3.13-slim", "owner": "test",
		"runtime_class_name": "gvisor", "warm_pool": 2, "workspace_volume": "shared", "workspace_claim": "workspaces",
		"ready_timeout": "10s",
	}
	s, diags := decodeConfig(mustJSON(hcl))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	// What an earlier process of this owner left, and another owner's claim.
	left := s.claim("old-sandbox", "acme", "cx-gone")
	if _, err := cl.dynamic.Resource(claimGVR).Namespace("default").Create(ctx, left, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a leftover claim: %v", err)
	}
	other := *s
	other.owner = "other"
	if _, err := cl.dynamic.Resource(claimGVR).Namespace("default").Create(ctx, other.claim("theirs", "acme", "cx-x"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create another owner's claim: %v", err)
	}

	p := configured(t, cfg, hcl)
	caps, err := p.Capabilities(ctx)
	if err != nil || !caps.Available || caps.Isolation != "kubernetes/gvisor" || !caps.RunAs {
		t.Fatalf("capabilities = %+v, %v; want available kubernetes/gvisor", caps, err)
	}
	if got := listOwned(t, cfg, claimGVR, "test"); len(got) != 0 {
		t.Fatalf("the leftover claim survived the sweep: %v", got[0].GetName())
	}
	if got := listOwned(t, cfg, claimGVR, "other"); len(got) != 1 {
		t.Fatalf("another owner's claims = %d, want 1 (the sweep must keep them)", len(got))
	}

	servers := t.TempDir()
	if err := os.WriteFile(filepath.Join(servers, "__init__.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	req := sandbox.CreateRequest{
		ID: "sb.1", Tenant: "acme", RunAs: &sandbox.HostUser{UID: 2001, GID: 2001},
		Limits: sandbox.Limits{MemoryBytes: 256 << 20, CPUsMilli: 500},
		Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}, {Source: servers, Target: "/cexec/servers", ReadOnly: true}},
	}
	created := make(chan error, 1)
	go func() {
		_, err := p.Create(ctx, req)
		created <- err
	}()
	claim := waitFor(t, cfg, claimGVR, "test", created)
	if claim.GetName() != claimName("test", "sb.1") || claim.GetAnnotations()[annoID] != "sb.1" || claim.GetAnnotations()[annoTenant] != "acme" ||
		claim.GetLabels()[labelTenant] != hash("acme") || claim.GetLabels()[labelManagedBy] != managedBy {
		t.Errorf("claim metadata = %v %v", claim.GetLabels(), claim.GetAnnotations())
	}
	pool, _, _ := unstructured.NestedString(claim.Object, "spec", "warmPoolRef", "name")

	err = <-created
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "agent-sandbox controller") || !strings.Contains(err.Error(), "sb.1") ||
		!strings.Contains(err.Error(), "Pod Security admission") {
		t.Errorf("create without a controller: %v; want a timeout that names the sandbox, the missing controller and, for link_down, Pod Security admission", err)
	}
	if got := listOwned(t, cfg, claimGVR, "test"); len(got) != 0 {
		t.Errorf("a failed create left its claim %s", got[0].GetName())
	}

	tmpl, err := cl.dynamic.Resource(templateGVR).Namespace("default").Get(ctx, pool, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claim's warm pool %q has no template of its name: %v", pool, err)
	}
	pod, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate", "spec")
	checkPod(t, pod)
	checkLinkDown(t, pod)
	if np, _, _ := unstructured.NestedString(tmpl.Object, "spec", "networkPolicyManagement"); np != "Managed" {
		t.Errorf("networkPolicyManagement = %q, want Managed for a sandbox without network", np)
	}
	wp, err := cl.dynamic.Resource(poolGVR).Namespace("default").Get(ctx, pool, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get warm pool: %v", err)
	}
	replicas, _, _ := unstructured.NestedInt64(wp.Object, "spec", "replicas")
	ref, _, _ := unstructured.NestedString(wp.Object, "spec", "sandboxTemplateRef", "name")
	if replicas != 2 || ref != pool {
		t.Errorf("warm pool replicas %d template %q, want 2 and %q", replicas, ref, pool)
	}

	if _, err := p.Create(ctx, sandbox.CreateRequest{ID: "sb-2", Tenant: "acme", Mounts: []sandbox.Mount{{Source: "/etc", Target: "/etc"}}}); !errors.Is(err, pluginapi.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot bind host paths") {
		t.Errorf("create with a host bind: %v; want invalid argument naming the bind", err)
	}
	if _, err := p.Create(ctx, sandbox.CreateRequest{ID: "sb-3", Tenant: "../etc"}); !errors.Is(err, pluginapi.ErrInvalidArgument) || !strings.Contains(err.Error(), `tenant "../etc"`) {
		t.Errorf("create for a tenant that is no subPath: %v; want invalid argument naming the tenant", err)
	}
	if err := p.Destroy(ctx, "sb.1"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("destroy of a sandbox that never started: %v; want not found", err)
	}
	if l, err := p.List(ctx); err != nil || len(l) != 0 {
		t.Errorf("list = %v, %v; want none", l, err)
	}

	// A new plugin process of the same owner (the first one crashed) deletes
	// the pool and template the first left.
	restarted := configured(t, cfg, hcl)
	if _, err := restarted.Capabilities(ctx); err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{poolGVR, templateGVR} {
		if got := listOwned(t, cfg, gvr, "test"); len(got) != 0 {
			t.Errorf("after a restart %d %s of the earlier run are left", len(got), gvr.Resource)
		}
	}

	// Close deletes what this process made.
	if err := ensure(ctx, cl, s, templateGVR, s.template("cx-close", &podSpec{tenant: "acme", image: s.image, python: s.python})); err != nil {
		t.Fatal(err)
	}
	if err := restarted.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := listOwned(t, cfg, templateGVR, "test"); len(got) != 0 {
		t.Errorf("after close %d templates are left", len(got))
	}
	if got := listOwned(t, cfg, claimGVR, "other"); len(got) != 1 {
		t.Errorf("another owner's claims = %d after close, want 1", len(got))
	}
}

// TestUnreachableCluster checks that a cluster the kubeconfig cannot reach
// makes the backend unavailable with the reason, not a failed load.
func TestUnreachableCluster(t *testing.T) {
	p := configured(t, &rest.Config{Host: "https://127.0.0.1:1", Timeout: 5 * time.Second}, map[string]any{"image": "python:3"})
	caps, err := p.Capabilities(context.Background())
	if err != nil || caps.Available || !strings.Contains(caps.UnavailableReason, "127.0.0.1:1") {
		t.Fatalf("capabilities = %+v, %v; want unavailable naming the server", caps, err)
	}
	if _, err := p.Create(context.Background(), sandbox.CreateRequest{ID: "x", Tenant: "t"}); !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Fatalf("create = %v, want unavailable", err)
	}
}

func checkPod(t *testing.T, pod map[string]any) {
	t.Helper()
	get := func(path ...string) any {
		v, _, _ := unstructured.NestedFieldNoCopy(pod, path...)
		return v
	}
	if get("runtimeClassName") != "gvisor" || get("automountServiceAccountToken") != false {
		t.Errorf("pod runtimeClassName %v automount %v", get("runtimeClassName"), get("automountServiceAccountToken"))
	}
	if get("securityContext", "runAsUser") != int64(2001) || get("securityContext", "runAsNonRoot") != true {
		t.Errorf("pod securityContext = %v", get("securityContext"))
	}
	containers := get("containers").([]any)
	c := containers[0].(map[string]any)
	limits, _, _ := unstructured.NestedStringMap(c, "resources", "limits")
	if limits["memory"] != "268435456" || limits["cpu"] != "500m" {
		t.Errorf("container limits = %v, want memory 268435456 and cpu 500m", limits)
	}
	mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	ws := mounts[0].(map[string]any)
	if ws["mountPath"] != "/workspace" || ws["subPath"] != "acme" {
		t.Errorf("workspace mount = %v, want /workspace with subPath acme", ws)
	}
	vols := get("volumes").([]any)
	claim, _, _ := unstructured.NestedString(vols[0].(map[string]any), "persistentVolumeClaim", "claimName")
	if claim != "workspaces" {
		t.Errorf("workspace volume claim = %q, want workspaces", claim)
	}
	checkCexecMounts(t, containers)
}

// checkCexecMounts checks that only the loader container, under its own
// uid, may write /cexec and /src: the sandbox container mounts them
// read-only.
func checkCexecMounts(t *testing.T, containers []any) {
	t.Helper()
	byName := map[string]map[string]any{}
	for _, c := range containers {
		m := c.(map[string]any)
		byName[m["name"].(string)] = m
	}
	mountAt := func(c map[string]any, path string) map[string]any {
		mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
		for _, m := range mounts {
			if m := m.(map[string]any); m["mountPath"] == path {
				return m
			}
		}
		return nil
	}
	sb, loader := byName[containerName], byName[loaderName]
	if sb == nil || loader == nil || len(containers) != 2 {
		t.Fatalf("containers %v, want %s and %s", containers, containerName, loaderName)
	}
	for _, dir := range []string{cexecDir, srcDir} {
		if m := mountAt(sb, dir); m == nil || m["readOnly"] != true {
			t.Errorf("the sandbox container's %s mount = %v, want readOnly", dir, m)
		}
		if m := mountAt(loader, loadDir+dir); m == nil || m["readOnly"] == true || m["name"] != mountAt(sb, dir)["name"] {
			t.Errorf("the loader's %s mount = %v, want the same volume writable", loadDir+dir, m)
		}
	}
	uid, _, _ := unstructured.NestedFieldNoCopy(loader, "securityContext", "runAsUser")
	ro, _, _ := unstructured.NestedFieldNoCopy(loader, "securityContext", "readOnlyRootFilesystem")
	if uid != int64(loaderUID) || ro != true {
		t.Errorf("loader securityContext runAsUser %v readOnlyRootFilesystem %v, want %d and true", uid, ro, loaderUID)
	}
	mounts, _, _ := unstructured.NestedSlice(loader, "volumeMounts")
	if len(mounts) != 2 {
		t.Errorf("the loader mounts %v; it needs the /cexec and /src volumes only (no workspace, no /tmp)", mounts)
	}
}

// waitFor waits for the first object of owner to appear while Create,
// which reports on created, is still waiting for it to be bound.
func waitFor(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource, owner string, created chan error) unstructured.Unstructured {
	t.Helper()
	for {
		if got := listOwned(t, cfg, gvr, owner); len(got) > 0 {
			return got[0]
		}
		select {
		case err := <-created:
			t.Fatalf("create returned before its %s appeared: %v", gvr.Resource, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
