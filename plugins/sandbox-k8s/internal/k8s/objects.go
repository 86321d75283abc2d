package k8s

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// The agent-sandbox v0.5.6 resources, used as unstructured objects: its Go
// module requires k8s.io/client-go v0.36, and this plugin keeps client-go
// at the version of the API server it is tested against (v0.34.4).
var (
	claimGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	templateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	poolGVR     = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	sandboxGVR  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
)

// Labels and annotations on every object the plugin makes.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "cexec"
	labelOwner     = "cexec.io/owner"
	// labelTenant holds a hash of the tenant: tenant names need not be
	// label values.
	labelTenant = "cexec.io/tenant-hash"
	annoTenant  = "cexec.io/tenant"
	annoID      = "cexec.io/sandbox-id"
	// podNameAnnotation is the agent-sandbox annotation on a Sandbox that
	// names its pod when it was adopted from a warm pool.
	podNameAnnotation = "agents.x-k8s.io/pod-name"
)

// Names and mount points inside the sandbox pod.
const (
	containerName = "sandbox"
	// loaderName is the container that writes /cexec: the sandbox
	// container mounts it read-only, so a program cannot change the
	// runtime or the server stubs of its own sandbox.
	loaderName = "loader"
	cexecDir   = "/cexec"
	// srcDir holds other read-only trees a request asks for (the local
	// tools scanner's /src/servers), loaded as /cexec is.
	srcDir       = "/src"
	workspaceDir = "/workspace"
	// loadDir is where the loader mounts the volumes of cexecDir and
	// srcDir, writable, as loadDir/cexec and loadDir/src.
	loadDir = "/load"
	// loaderUID owns the files of /cexec; never a tenant's uid in
	// practice, though the read-only mount is what protects them.
	loaderUID = 65533
	// loaderMemory bounds the loader: an idle Python and a streamed tar.
	loaderMemory = "64Mi"
)

// ownerSelector selects the objects of one plugin owner.
func ownerSelector(owner string) string {
	return labelManagedBy + "=" + managedBy + "," + labelOwner + "=" + owner
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// claimName is the SandboxClaim of sandbox id: a Kubernetes name derived
// from the id, which need not be one (the id itself is an annotation).
func claimName(owner, id string) string { return "cx-" + hash(owner, "claim", id) }

// podSpec describes what a tenant's sandbox pods look like; equal specs
// share a SandboxTemplate and SandboxWarmPool.
type podSpec struct {
	tenant  string
	runAs   int64
	limits  sandbox.Limits
	network bool
	// linkDown adds the init container that takes the pod's interfaces
	// down (network_isolation "link_down", no network).
	linkDown bool
	volume   string // one of the workspace_volume modes
	claim    string // the PersistentVolumeClaim, for volumePerTenant and volumeShared
	subPath  string // for volumeShared
	image    string
	python   string
	runtime  string
	warmPool int64
}

// templateName is the SandboxTemplate and SandboxWarmPool of spec: a hash
// of what goes into the pod (the other limits are the runtime's).
func (p *podSpec) templateName(owner string) string {
	l := p.limits
	return "cx-" + hash(owner, "template", p.tenant, strconv.FormatInt(p.runAs, 10),
		fmt.Sprint(l.MemoryBytes, l.CPUsMilli, l.TmpBytes, l.ShmBytes), strconv.FormatBool(p.network),
		strconv.FormatBool(p.linkDown), p.volume, p.claim, p.subPath, p.image, p.python, p.runtime, strconv.FormatInt(p.warmPool, 10))
}

func (s *settings) labels(tenant string) map[string]any {
	l := map[string]any{labelManagedBy: managedBy, labelOwner: s.owner}
	if tenant != "" {
		l[labelTenant] = hash(tenant)
	}
	return l
}

func object(gvr schema.GroupVersionResource, kind, name string, labels, annotations map[string]any, spec map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "labels": labels}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata":   meta,
		"spec":       spec,
	}}
}

// template is the SandboxTemplate of spec: the pod the sandbox runs in.
func (s *settings) template(name string, p *podSpec) *unstructured.Unstructured {
	spec := map[string]any{
		"podTemplate": map[string]any{
			"metadata": map[string]any{"labels": s.labels(p.tenant)},
			"spec":     p.pod(),
		},
	}
	if !p.network {
		// Managed by the controller, with no rules: no traffic in or out
		// where the CNI enforces NetworkPolicy. In link_down mode a second
		// layer under the init container's cut.
		spec["networkPolicyManagement"] = "Managed"
		spec["networkPolicy"] = map[string]any{"ingress": []any{}, "egress": []any{}}
	} else {
		spec["networkPolicyManagement"] = "Unmanaged"
	}
	return object(templateGVR, "SandboxTemplate", name, s.labels(p.tenant), map[string]any{annoTenant: p.tenant}, spec)
}

// pool is the SandboxWarmPool that keeps spec's pods warm.
func (s *settings) pool(name string, p *podSpec) *unstructured.Unstructured {
	return object(poolGVR, "SandboxWarmPool", name, s.labels(p.tenant), map[string]any{annoTenant: p.tenant}, map[string]any{
		"replicas":           p.warmPool,
		"sandboxTemplateRef": map[string]any{"name": name},
	})
}

// claim is the SandboxClaim of sandbox id from the warm pool pool.
func (s *settings) claim(id, tenant, pool string) *unstructured.Unstructured {
	return object(claimGVR, "SandboxClaim", claimName(s.owner, id), s.labels(tenant),
		map[string]any{annoID: id, annoTenant: tenant},
		map[string]any{
			"warmPoolRef": map[string]any{"name": pool},
			"lifecycle":   map[string]any{"shutdownPolicy": "Delete"},
		})
}

// idleSrc is the containers' main process: pid 1 of its pid namespace, it
// waits for signals and reaps the orphans reparented to it.
const idleSrc = `import os, signal
def reap(*_):
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return
signal.signal(signal.SIGCHLD, reap)
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    signal.pause()
`

// pod is the pod spec of a sandbox: an unprivileged container that idles
// until the plugin starts the runtime's zygote in it over pods/exec, with
// the workspace volume, the runtime at /cexec (read-only) and memory-backed
// /tmp and /dev/shm; and the loader, which alone mounts /cexec (and /src)
// writable and receives the runtime and the read-only trees over pods/exec. A loader
// container rather than an init container or an image with the runtime:
// the stubs to copy are known when a sandbox is claimed, after the warm
// pod started, and the runtime stays the one of this plugin's build.
func (p *podSpec) pod() map[string]any {
	res := map[string]any{}
	if p.limits.MemoryBytes > 0 {
		res["memory"] = strconv.FormatInt(p.limits.MemoryBytes, 10)
	}
	if p.limits.CPUsMilli > 0 {
		res["cpu"] = strconv.FormatInt(p.limits.CPUsMilli, 10) + "m"
	}
	mounts := []any{
		map[string]any{"name": "workspace", "mountPath": workspaceDir},
		map[string]any{"name": "cexec", "mountPath": cexecDir, "readOnly": true},
		map[string]any{"name": "src", "mountPath": srcDir, "readOnly": true},
		map[string]any{"name": "tmp", "mountPath": "/tmp"},
		map[string]any{"name": "shm", "mountPath": "/dev/shm"},
	}
	var workspace map[string]any
	switch p.volume {
	case volumePerTenant:
		workspace = map[string]any{"name": "workspace", "persistentVolumeClaim": map[string]any{"claimName": p.claim}}
	case volumeShared:
		workspace = map[string]any{"name": "workspace", "persistentVolumeClaim": map[string]any{"claimName": p.claim}}
		mounts[0].(map[string]any)["subPath"] = p.subPath
	default:
		workspace = map[string]any{"name": "workspace", "emptyDir": map[string]any{}}
	}
	memDir := func(name string, size int64) map[string]any {
		d := map[string]any{"medium": "Memory"}
		if size > 0 {
			d["sizeLimit"] = strconv.FormatInt(size, 10)
		}
		return map[string]any{"name": name, "emptyDir": d}
	}
	idle := []any{p.python, "-I", "-S", "-c", idleSrc}
	loaderRes := map[string]any{"memory": loaderMemory, "cpu": "100m"}
	loader := map[string]any{
		"name":            loaderName,
		"image":           p.image,
		"command":         idle,
		"resources":       map[string]any{"limits": loaderRes, "requests": loaderRes},
		"securityContext": confined(map[string]any{"runAsUser": int64(loaderUID), "runAsGroup": int64(loaderUID)}),
		"volumeMounts": []any{
			map[string]any{"name": "cexec", "mountPath": loadDir + cexecDir},
			map[string]any{"name": "src", "mountPath": loadDir + srcDir},
		},
	}
	spec := map[string]any{
		// The zygote's sweeps need a pid namespace per container.
		"shareProcessNamespace":        false,
		"automountServiceAccountToken": false,
		"enableServiceLinks":           false,
		"securityContext": map[string]any{
			"runAsNonRoot":   true,
			"runAsUser":      p.runAs,
			"runAsGroup":     p.runAs,
			"fsGroup":        p.runAs,
			"seccompProfile": map[string]any{"type": "RuntimeDefault"},
		},
		"containers": []any{map[string]any{
			"name":  containerName,
			"image": p.image,
			// Idles as the container's main process and reaps the
			// programs' orphans; the zygote is started with pods/exec.
			"command":         idle,
			"workingDir":      workspaceDir,
			"resources":       map[string]any{"limits": res, "requests": res},
			"securityContext": confined(nil),
			"volumeMounts":    mounts,
		}, loader},
		"volumes": []any{
			workspace,
			map[string]any{"name": "cexec", "emptyDir": map[string]any{}},
			map[string]any{"name": "src", "emptyDir": map[string]any{}},
			memDir("tmp", p.limits.TmpBytes),
			memDir("shm", p.limits.ShmBytes),
		},
	}
	if p.runtime != "" {
		spec["runtimeClassName"] = p.runtime
	}
	if p.linkDown {
		spec["initContainers"] = []any{p.linkDownContainer()}
	}
	return spec
}

// confined is a container's securityContext: no privileges, no writable
// root, and extra.
func confined(extra map[string]any) map[string]any {
	c := map[string]any{
		"allowPrivilegeEscalation": false,
		"readOnlyRootFilesystem":   true,
		"capabilities":             map[string]any{"drop": []any{"ALL"}},
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}
