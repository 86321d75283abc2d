package k8s

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// tenantPath is a tenant name usable as a subPath and in a claim name.
var tenantPath = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// idPattern is a sandbox id, as every backend takes them.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// envName is an environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// defaultShm is the size of /dev/shm when the request sets none.
const defaultShm = 64 << 20

// checkRequest turns a request into the pod it needs and the host trees to
// copy into it. A pod cannot bind host paths of the cexecd machine: the
// workspace comes from workspace_volume, and read-only trees under /cexec
// (the server stubs, shared skills) are copied in when the sandbox starts.
func (s *settings) checkRequest(req sandbox.CreateRequest) (*podSpec, []upload, error) {
	if req.ID == "" {
		return nil, nil, fmt.Errorf("the sandbox id is empty")
	}
	if !idPattern.MatchString(req.ID) {
		return nil, nil, fmt.Errorf("sandbox id %q: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", req.ID)
	}
	if req.Network && !s.allowNetwork {
		return nil, nil, fmt.Errorf("network access was requested but this backend's allow_network is false")
	}
	p := &podSpec{
		tenant: req.Tenant, runAs: s.runAs, limits: req.Limits, network: req.Network && s.allowNetwork,
		linkDown: !(req.Network && s.allowNetwork) && s.netIsolation == isolationLinkDown,
		volume:   s.volume, image: s.image, python: s.python, runtime: s.runtimeClass, warmPool: s.warmPool,
	}
	l := &p.limits
	if l.MemoryBytes == 0 {
		l.MemoryBytes = s.limits.memory
	}
	if l.CPUsMilli == 0 {
		l.CPUsMilli = s.limits.cpusMilli
	}
	if l.Timeout == 0 {
		l.Timeout = s.limits.timeout
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = s.limits.output
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = s.limits.tmp
	}
	if l.ShmBytes == 0 {
		l.ShmBytes = defaultShm
	}
	if l.MemoryBytes < 0 || l.CPUsMilli < 0 || l.Timeout < 0 || l.OutputBytes < 0 || l.TmpBytes < 0 || l.ShmBytes < 0 || l.Pids < 0 || l.FileBytes < 0 {
		return nil, nil, fmt.Errorf("limits must not be negative")
	}
	if req.RunAs != nil {
		if req.RunAs.UID == 0 || req.RunAs.GID == 0 {
			return nil, nil, fmt.Errorf("run_as: sandboxes never run as root")
		}
		p.runAs = int64(req.RunAs.UID)
	}
	switch s.volume {
	case volumePerTenant, volumeShared:
		if !tenantPath.MatchString(req.Tenant) {
			return nil, nil, fmt.Errorf("tenant %q cannot name a workspace volume: workspace_volume %q needs tenant names of letters, digits, '.', '_' and '-'", req.Tenant, s.volume)
		}
		p.claim = s.wsClaim
		if s.volume == volumePerTenant {
			// Not lower-cased: tenants "A" and "a" must not share a claim.
			p.claim = s.wsClaim + req.Tenant
			if !dnsLabel.MatchString(p.claim) {
				return nil, nil, fmt.Errorf("tenant %q: %q is not a PersistentVolumeClaim name (lower-case letters, digits and '-')", req.Tenant, p.claim)
			}
		} else {
			p.subPath = req.Tenant
		}
	}
	for k := range req.Env {
		if !envName.MatchString(k) {
			return nil, nil, fmt.Errorf("environment variable name %q is not valid", k)
		}
	}
	var uploads []upload
	for _, m := range req.Mounts {
		if !filepath.IsAbs(m.Source) {
			return nil, nil, fmt.Errorf("mount source %q is not an absolute path", m.Source)
		}
		target := path.Clean(m.Target)
		switch {
		case target == workspaceDir:
			// The pod's workspace volume stands for it.
		case m.ReadOnly && (strings.HasPrefix(target, cexecDir+"/") && !strings.HasPrefix(target+"/", cexecDir+"/lib/") || strings.HasPrefix(target, srcDir+"/")):
			uploads = append(uploads, upload{source: m.Source, target: strings.TrimPrefix(target, "/")})
		default:
			return nil, nil, fmt.Errorf("mount %s: a pod cannot bind host paths; sandbox-k8s takes %s from workspace_volume and copies read-only trees under %s/ and %s/ only", m.Target, workspaceDir, cexecDir, srcDir)
		}
	}
	return p, uploads, nil
}
