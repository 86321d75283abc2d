package k8s

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// Config is the plugin's block in cexec.hcl, as the host decodes it against
// configSchema.
type Config struct {
	Kubeconfig       string  `json:"kubeconfig"`
	Context          string  `json:"context"`
	InCluster        bool    `json:"in_cluster"`
	Namespace        string  `json:"namespace"`
	Image            string  `json:"image"`
	Python           string  `json:"python"`
	RuntimeClassName string  `json:"runtime_class_name"`
	WarmPool         *int64  `json:"warm_pool"`
	WorkspaceVolume  string  `json:"workspace_volume"`
	WorkspaceClaim   string  `json:"workspace_claim"`
	Owner            string  `json:"owner"`
	ReadyTimeout     string  `json:"ready_timeout"`
	AllowNetwork     bool    `json:"allow_network"`
	NetworkIsolation string  `json:"network_isolation"`
	MemoryMB         int64   `json:"memory_mb"`
	CPUs             float64 `json:"cpus"`
	ExecTimeout      string  `json:"exec_timeout"`
	OutputKB         int64   `json:"output_kb"`
	TmpMB            int64   `json:"tmp_mb"`
	RunAsUID         *int64  `json:"run_as_uid"`
}

// Workspace volume modes.
const (
	// volumePerTenant mounts the PersistentVolumeClaim named
	// workspace_claim + tenant at /workspace.
	volumePerTenant = "pvc_per_tenant"
	// volumeShared mounts the subPath <tenant> of one ReadWriteMany claim.
	volumeShared = "shared"
	// volumeEmpty gives each sandbox an emptyDir: nothing persists.
	volumeEmpty = "empty_dir"
)

// Network isolation modes of sandboxes without network.
const (
	// isolationLinkDown adds an init container that takes every interface
	// of the pod's network namespace but lo down, whatever the CNI; the
	// template's NetworkPolicy without rules stays as a second layer.
	isolationLinkDown = "link_down"
	// isolationPolicy relies on the NetworkPolicy alone: for namespaces
	// whose Pod Security admission refuses NET_ADMIN, on a CNI that
	// enforces NetworkPolicy.
	isolationPolicy = "policy"
)

// Defaults of Config.
const (
	defaultNamespace    = "default"
	defaultPython       = "/usr/bin/python3"
	defaultWarmPool     = 1
	defaultOwner        = "cexecd"
	defaultReadyTimeout = 2 * time.Minute
	defaultMemoryMB     = 512
	defaultTimeout      = 30 * time.Second
	defaultOutputKB     = 1024
	defaultTmpMB        = 64
	defaultRunAs        = 65534
)

var configSchema = pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
	{Name: "kubeconfig", Type: "string", Description: "Path of the kubeconfig file to reach the cluster with. Default: $KUBECONFIG, then ~/.kube/config; ignored with in_cluster."},
	{Name: "context", Type: "string", Description: "Context of the kubeconfig to use. Default: its current context."},
	{Name: "in_cluster", Type: "bool", Description: "Use the pod's service account (cexecd runs in the cluster). Default false."},
	{Name: "namespace", Type: "string", Description: "Namespace of the sandboxes, their templates, warm pools and workspace claims. Default \"default\"."},
	{Name: "image", Type: "string", Description: "Container image of the sandboxes; it must have a Python 3 interpreter at python. Required."},
	{Name: "python", Type: "string", Description: "Python interpreter inside the image. Default /usr/bin/python3."},
	{Name: "runtime_class_name", Type: "string", Description: "RuntimeClass of the sandbox pods, such as \"gvisor\" or \"kata\". Default: the cluster's default runtime."},
	{Name: "warm_pool", Type: "number", Description: "Pods kept warm per tenant by the SandboxWarmPool. Default 1."},
	{Name: "workspace_volume", Type: "string", Description: "Where /workspace comes from: \"pvc_per_tenant\" (the claim workspace_claim followed by the tenant's name, so tenant names must be lower-case), \"shared\" (the tenant's subPath of the ReadWriteMany claim workspace_claim) or \"empty_dir\" (nothing persists). Default empty_dir."},
	{Name: "workspace_claim", Type: "string", Description: "PersistentVolumeClaim name (shared) or name prefix (pvc_per_tenant) of the workspaces."},
	{Name: "owner", Type: "string", Description: "Label value that marks this cexecd's objects (cexec.io/owner), so that a restarted plugin finds and deletes what it left. Default \"cexecd\"; give each cexecd sharing a namespace its own."},
	{Name: "ready_timeout", Type: "string", Description: "How long a sandbox may take to be claimed and start its runtime, a Go duration. Default 2m."},
	{Name: "allow_network", Type: "bool", Description: "Let sandboxes that ask for network have it. Default false: see network_isolation."},
	{Name: "network_isolation", Type: "string", Description: "How a sandbox without network is cut off. \"link_down\" (default): an init container with only CAP_NET_ADMIN takes every interface but lo down before the sandbox starts, whatever the CNI; the namespace's Pod Security admission must allow NET_ADMIN (level privileged, as baseline and restricted refuse it). \"policy\": only the NetworkPolicy without rules that the template also asks for in link_down mode, which cuts traffic only where the CNI enforces NetworkPolicy."},
	{Name: "memory_mb", Type: "number", Description: "Default memory limit of a sandbox pod in MiB. Default 512."},
	{Name: "cpus", Type: "number", Description: "Default CPU limit of a sandbox pod, for example 0.5. Default: no limit."},
	{Name: "exec_timeout", Type: "string", Description: "Default wall-clock limit of one execution, a Go duration. Default 30s."},
	{Name: "output_kb", Type: "number", Description: "Default cap on the stdout plus stderr of one execution in KiB. Default 1024."},
	{Name: "tmp_mb", Type: "number", Description: "Size of a sandbox's /tmp (memory-backed emptyDir) in MiB. Default 64."},
	{Name: "run_as_uid", Type: "number", Description: "Uid (and gid) of the sandbox's processes when the request names none. Never 0. Default 65534."},
}}

// dnsLabel is a Kubernetes object name that fits in a label value too.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// settings is a validated Config.
type settings struct {
	kubeconfig, context string
	inCluster           bool
	namespace           string
	image, python       string
	runtimeClass        string
	warmPool            int64
	volume, wsClaim     string
	owner               string
	readyTimeout        time.Duration
	allowNetwork        bool
	netIsolation        string
	limits              limitDefaults
	runAs               int64
}

type limitDefaults struct {
	memory, cpusMilli, output, tmp int64
	timeout                        time.Duration
}

// decodeConfig checks a Config. Problems come back as diagnostics that name
// the attribute.
func decodeConfig(raw json.RawMessage) (*settings, pluginapi.Diagnostics) {
	var c Config
	if diags := pluginapi.DecodeConfig("sandbox-k8s", raw, &c); diags.HasErrors() {
		return nil, diags
	}
	s := &settings{
		kubeconfig: c.Kubeconfig, context: c.Context, inCluster: c.InCluster,
		namespace: or(c.Namespace, defaultNamespace), image: c.Image, python: or(c.Python, defaultPython),
		runtimeClass: c.RuntimeClassName, warmPool: defaultWarmPool, volume: or(c.WorkspaceVolume, volumeEmpty),
		wsClaim: c.WorkspaceClaim, owner: or(c.Owner, defaultOwner), readyTimeout: defaultReadyTimeout,
		allowNetwork: c.AllowNetwork, netIsolation: or(c.NetworkIsolation, isolationLinkDown), runAs: defaultRunAs,
		limits: limitDefaults{
			memory: orDefault(c.MemoryMB, defaultMemoryMB) << 20, cpusMilli: int64(c.CPUs * 1000),
			output: orDefault(c.OutputKB, defaultOutputKB) << 10, tmp: orDefault(c.TmpMB, defaultTmpMB) << 20,
			timeout: defaultTimeout,
		},
	}
	var diags pluginapi.Diagnostics
	bad := func(attr, detail string) {
		diags = append(diags, pluginapi.Errorf(attr, "Invalid "+attr, detail))
	}
	if s.image == "" {
		diags = append(diags, pluginapi.Errorf("image", "Missing image", "sandbox-k8s needs image: a container image with a Python 3 interpreter"))
	}
	if !path.IsAbs(s.python) {
		bad("python", fmt.Sprintf("%q is not an absolute path inside the image", s.python))
	}
	if c.InCluster && c.Kubeconfig != "" {
		bad("in_cluster", "set either in_cluster or kubeconfig, not both")
	}
	for _, n := range []struct{ attr, v string }{{"namespace", s.namespace}, {"owner", s.owner}, {"runtime_class_name", s.runtimeClass}} {
		if n.v != "" && !dnsLabel.MatchString(n.v) {
			bad(n.attr, fmt.Sprintf("%q is not a Kubernetes name (lower-case letters, digits and '-', at most 63)", n.v))
		}
	}
	if c.WarmPool != nil {
		if *c.WarmPool < 0 || *c.WarmPool > 100 {
			bad("warm_pool", "must be between 0 and 100")
		}
		s.warmPool = *c.WarmPool
	}
	switch s.volume {
	case volumeEmpty:
		if s.wsClaim != "" {
			bad("workspace_claim", "is only used with workspace_volume \"pvc_per_tenant\" or \"shared\"")
		}
	case volumePerTenant, volumeShared:
		if s.wsClaim == "" {
			diags = append(diags, pluginapi.Errorf("workspace_claim", "Missing workspace_claim", fmt.Sprintf("workspace_volume %q needs workspace_claim", s.volume)))
		} else if !dnsLabel.MatchString(s.wsClaim) && !dnsLabel.MatchString(s.wsClaim+"x") {
			bad("workspace_claim", fmt.Sprintf("%q is not a Kubernetes name or name prefix", s.wsClaim))
		}
	default:
		bad("workspace_volume", fmt.Sprintf("%q: use \"pvc_per_tenant\", \"shared\" or \"empty_dir\"", s.volume))
	}
	if s.netIsolation != isolationLinkDown && s.netIsolation != isolationPolicy {
		bad("network_isolation", fmt.Sprintf("%q: use \"link_down\" (interfaces taken down by an init container with NET_ADMIN) or \"policy\" (a NetworkPolicy only, for a CNI that enforces it)", s.netIsolation))
	}
	for _, d := range []struct {
		attr, v string
		to      *time.Duration
	}{{"ready_timeout", c.ReadyTimeout, &s.readyTimeout}, {"exec_timeout", c.ExecTimeout, &s.limits.timeout}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			bad(d.attr, fmt.Sprintf("%q is not a positive duration such as \"30s\"", d.v))
		}
		*d.to = v
	}
	for _, n := range []struct {
		attr string
		v    int64
	}{{"memory_mb", c.MemoryMB}, {"output_kb", c.OutputKB}, {"tmp_mb", c.TmpMB}} {
		if n.v < 0 {
			bad(n.attr, "must not be negative")
		}
	}
	if c.CPUs < 0 {
		bad("cpus", "must not be negative")
	}
	if c.RunAsUID != nil {
		if *c.RunAsUID <= 0 || *c.RunAsUID > 1<<31-1 {
			bad("run_as_uid", "must be a positive id: sandboxes never run as root")
		}
		s.runAs = *c.RunAsUID
	}
	return s, diags
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}
