package k8s

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// The tenants of TestClusterWorkspaceVolumes and their uids.
var wsTenants = []struct {
	name string
	uid  uint32
}{{"acme", 2101}, {"globex", 2102}}

// TestClusterWorkspaceVolumes checks each workspace_volume mode in real
// pods, on static hostPath PersistentVolumes (the test cluster has no
// provisioner; its node is this machine, so the test reads the volumes'
// directories): with pvc_per_tenant and shared, a file a tenant writes is
// there in its next sandbox and on the tenant's directory of the volume,
// and the other tenant cannot reach it; with empty_dir nothing persists.
func TestClusterWorkspaceVolumes(t *testing.T) {
	e := clusterOrSkip(t)
	rc, err := restConfig(&settings{kubeconfig: e.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := newCluster(rc)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cx-ws-%d-", os.Getpid())

	t.Run(volumePerTenant, func(t *testing.T) {
		dirs := map[string]string{}
		for _, tn := range wsTenants {
			// A hostPath volume has no fsGroup ownership management:
			// the tenant's directory is the tenant's, as a
			// provisioner's would be.
			dirs[tn.name] = hostDir(t, int(tn.uid), 0o700)
			staticClaim(t, cl, e.Namespace, prefix+tn.name, dirs[tn.name], corev1.ReadWriteOnce)
		}
		p := e.plugin(t, testOwner("ws-pvc"), map[string]any{"workspace_volume": volumePerTenant, "workspace_claim": prefix})
		persists(t, p, "pvc-a")
		if _, err := os.Stat(filepath.Join(dirs["acme"], "x")); err != nil {
			t.Errorf("acme's file is not on its volume's directory: %v", err)
		}
		if out := wsRun(t, p, "pvc-b", "globex", wsLook); out != "list []\nread-x refused\n" {
			t.Errorf("globex's sandbox printed:\n%swant an empty workspace without acme's file", out)
		}
		if names := dirNames(t, dirs["globex"]); len(names) != 0 {
			t.Errorf("globex's volume directory holds %v", names)
		}
	})

	t.Run(volumeShared, func(t *testing.T) {
		// One volume for all tenants, whose uids differ: the kubelet
		// makes each tenant's subPath with the mode of the volume's root.
		root := hostDir(t, 0, 0o777)
		staticClaim(t, cl, e.Namespace, prefix+"shared", root, corev1.ReadWriteMany)
		p := e.plugin(t, testOwner("ws-shared"), map[string]any{"workspace_volume": volumeShared, "workspace_claim": prefix + "shared"})
		persists(t, p, "shared-a")
		if _, err := os.Stat(filepath.Join(root, "acme", "x")); err != nil {
			t.Errorf("acme's file is not in its subPath of the volume: %v", err)
		}
		if fi, err := os.Stat(filepath.Join(root, "acme")); err == nil {
			t.Logf("the kubelet made acme's subPath with mode %v", fi.Mode())
		}
		out := wsRun(t, p, "shared-b", "globex", wsLook+`open("/workspace/y", "w").write("globex")
for path in ("/workspace/../acme/x", "/acme/x", "../acme/x", "/workspace/../../acme/x"):
    try:
        print("escape", path, "READ", open(path).read())
    except OSError as e:
        print("escape", path, "refused")
import glob
print("found", [f for d in ("/workspace", "/tmp", "/mnt", "/var", "/home", "/run", "/srv", "/cexec") for f in glob.glob(d + "/**/x", recursive=True)])
`)
		if !strings.HasPrefix(out, "list []\nread-x refused\n") || strings.Contains(out, "READ") || !strings.Contains(out, "found []\n") {
			t.Errorf("globex's sandbox printed:\n%swant its own empty subPath and no way to acme's file", out)
		}
		if names := dirNames(t, root); strings.Join(names, ",") != "acme,globex" {
			t.Errorf("the shared volume's root holds %v, want the subPaths acme and globex", names)
		}
		if _, err := os.Stat(filepath.Join(root, "globex", "y")); err != nil {
			t.Errorf("globex's file is not in its subPath: %v", err)
		}
	})

	t.Run(volumeEmpty, func(t *testing.T) {
		p := e.plugin(t, testOwner("ws-empty"), nil)
		wsRun(t, p, "empty-1", "acme", wsWrite)
		if out := wsRun(t, p, "empty-2", "acme", wsLook); out != "list []\nread-x refused\n" {
			t.Errorf("a new sandbox with empty_dir printed:\n%swant an empty workspace", out)
		}
	})
}

const (
	wsWrite = `open("/workspace/x", "w").write("acme-1")
print("wrote")
`
	wsLook = `import os
print("list", sorted(os.listdir("/workspace")))
try:
    print("read-x", open("/workspace/x").read())
except OSError:
    print("read-x refused")
`
)

// persists checks that what tenant acme writes in one sandbox a new
// sandbox (in another pod) reads back.
func persists(t *testing.T, p *Plugin, id string) {
	t.Helper()
	_, first := wsPod(t, p, id+"1", "acme", wsWrite)
	out, second := wsPod(t, p, id+"2", "acme", wsLook)
	if first == second {
		t.Fatalf("both sandboxes of acme ran in pod %s", second)
	}
	if out != "list ['x']\nread-x acme-1\n" {
		t.Errorf("acme's second sandbox printed:\n%swant the file of its first", out)
	}
}

// wsRun runs code in a new sandbox id of tenant (as the tenant's uid),
// destroyed afterwards, and returns its stdout.
func wsRun(t *testing.T, p *Plugin, id, tenant, code string) string {
	t.Helper()
	out, _ := wsPod(t, p, id, tenant, code)
	return out
}

// wsPod is wsRun that also names the pod the sandbox ran in.
func wsPod(t *testing.T, p *Plugin, id, tenant, code string) (out, pod string) {
	t.Helper()
	req := sandbox.CreateRequest{ID: id, Tenant: tenant}
	for _, tn := range wsTenants {
		if tn.name == tenant {
			req.RunAs = &sandbox.HostUser{UID: tn.uid, GID: tn.uid}
		}
	}
	if _, err := p.Create(t.Context(), req); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	b, _ := p.boxes.Get(id)
	out = runIn(t, p, id, code)
	if err := p.Destroy(t.Context(), id); err != nil {
		t.Fatalf("destroy %s: %v", id, err)
	}
	return out, b.pod
}

// hostDir is a directory on this machine (the node) for a hostPath volume,
// owned by uid, removed when t ends.
func hostDir(t *testing.T, uid int, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir's parent is private; the sandbox's uid must pass it.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// staticClaim makes a hostPath PersistentVolume on dir and the claim name
// in ns bound to it, both deleted when t ends.
func staticClaim(t *testing.T, cl *cluster, ns, name, dir string, mode corev1.PersistentVolumeAccessMode) {
	t.Helper()
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	noClass := ""
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{mode},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              noClass,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
		},
	}
	pvs := cl.core.CoreV1().PersistentVolumes()
	if _, err := pvs.Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PersistentVolume %s: %v", name, err)
	}
	t.Cleanup(func() { _ = pvs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
			StorageClassName: &noClass,
			VolumeName:       name,
		},
	}
	pvcs := cl.core.CoreV1().PersistentVolumeClaims(ns)
	if _, err := pvcs.Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PersistentVolumeClaim %s: %v", name, err)
	}
	t.Cleanup(func() { _ = pvcs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		got, err := pvcs.Get(t.Context(), name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.ClaimBound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim %s is not bound to its volume after a minute: %v", name, err)
		}
	}
}
