package msb

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// Paths inside the guest.
const (
	guestWorkspace = "/workspace"
	guestCexec     = "/cexec"
	guestLib       = "/cexec/lib"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedPrefixes may not be mount targets: they hold the guest's system,
// its runtime or kernel interfaces.
var reservedPrefixes = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/proc", "/dev", "/sys", "/tmp", "/run", "/.msb", guestLib}

// spec is a validated CreateRequest with the backend's defaults applied.
type spec struct {
	id       string
	tenant   string
	network  bool
	mounts   []sandbox.Mount // sources resolved, parents first
	env      map[string]string
	limits   sandbox.Limits
	cpus     int64
	memoryMB int64
	tmpMB    int64
}

// checkRequest validates req and applies the defaults of s. Warnings say
// which limits a microVM enforces differently.
func checkRequest(s *settings, req sandbox.CreateRequest) (*spec, pluginapi.Diagnostics, error) {
	if !idPattern.MatchString(req.ID) {
		return nil, nil, fmt.Errorf("sandbox id %q: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit", req.ID)
	}
	if req.Network && !s.allowNetwork {
		return nil, nil, fmt.Errorf("network access was requested but this backend's allow_network is false")
	}
	sp := &spec{id: req.ID, tenant: req.Tenant, network: req.Network, env: map[string]string{}, limits: req.Limits}
	seen := map[string]bool{}
	for _, m := range req.Mounts {
		if why := reservedTarget(m.Target); why != "" {
			return nil, nil, fmt.Errorf("mount target %q: %s", m.Target, why)
		}
		if seen[m.Target] {
			return nil, nil, fmt.Errorf("mount target %q given twice", m.Target)
		}
		seen[m.Target] = true
		if !filepath.IsAbs(m.Source) {
			return nil, nil, fmt.Errorf("mount source %q is not an absolute path", m.Source)
		}
		src, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return nil, nil, fmt.Errorf("mount source: %w", err)
		}
		// msb and the 0.2 server split SOURCE:DEST at a colon.
		if strings.ContainsAny(src, ":\n") {
			return nil, nil, fmt.Errorf("mount source %q: microsandbox cannot mount paths containing ':' or newlines", src)
		}
		sp.mounts = append(sp.mounts, sandbox.Mount{Source: src, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	sort.SliceStable(sp.mounts, func(i, j int) bool { return len(sp.mounts[i].Target) < len(sp.mounts[j].Target) })
	for k, v := range req.Env {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			return nil, nil, fmt.Errorf("environment variable %q: invalid name or value", k)
		}
		sp.env[k] = v
	}
	if sp.limits.Timeout <= 0 {
		sp.limits.Timeout = s.timeout
	}
	if sp.limits.OutputBytes <= 0 {
		sp.limits.OutputBytes = s.output
	}
	sp.cpus = s.cpus
	if sp.limits.CPUsMilli > 0 {
		sp.cpus = (sp.limits.CPUsMilli + 999) / 1000
	}
	sp.memoryMB = s.memoryMB
	if sp.limits.MemoryBytes > 0 {
		sp.memoryMB = (sp.limits.MemoryBytes + 1<<20 - 1) >> 20
	}
	var diags pluginapi.Diagnostics
	if sp.memoryMB < minMemoryMB {
		diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Summary: "Sandbox memory raised",
			Detail: fmt.Sprintf("a microVM's memory is the sandbox's memory limit and needs at least %d MiB for its kernel and the runtime; %d MiB was asked for", minMemoryMB, sp.memoryMB)})
		sp.memoryMB = minMemoryMB
	}
	sp.tmpMB = s.tmpMB
	if sp.limits.TmpBytes > 0 {
		sp.tmpMB = (sp.limits.TmpBytes + 1<<20 - 1) >> 20
	}
	if sp.limits.Pids > 0 {
		diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Summary: "Process limit per user only",
			Detail: "inside a microVM the process limit is RLIMIT_NPROC of the image's user, which does not bind root (the user of the python images); the VM's memory and vCPUs bound a fork bomb instead"})
	}
	return sp, diags, nil
}

// reservedTarget says why p cannot be a mount target, or "".
func reservedTarget(p string) string {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "not an absolute, clean path"
	}
	if strings.ContainsAny(p, ":\n") {
		return "microsandbox cannot mount at paths containing ':' or newlines"
	}
	if p == "/" || p == guestCexec {
		return "would hide the sandbox's system"
	}
	for _, r := range reservedPrefixes {
		if p == r || strings.HasPrefix(p, r+"/") {
			return "reserved for the sandbox's system (" + r + ")"
		}
	}
	return ""
}

// zygoteConfig is how the standard runtime starts in the guest: with its
// control channel on the zygote's stdin and stdout when they are all a
// backend has (msb exec --stream). The microVM's memory is the sandbox's
// limit, so every kill by the guest kernel's OOM killer, which it counts
// in /proc/vmstat, is one at the limit.
func zygoteConfig(s *settings, libDir string, path []string, stdio bool, sp *spec) runtime.ZygoteConfig {
	return runtime.ZygoteConfig{
		Python:       s.python,
		LibDir:       libDir,
		Path:         path,
		Workdir:      guestWorkspace,
		Preload:      s.preload,
		Rlimits:      runtime.Rlimits{Processes: sp.limits.Pids},
		StdioControl: stdio,
		MemoryEvents: "/proc/vmstat",
		MemoryLimit:  sp.memoryMB << 20,
	}
}

// isDir reports whether p is a directory.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
