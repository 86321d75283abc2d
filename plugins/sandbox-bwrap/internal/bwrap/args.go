package bwrap

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// Descriptors of the bwrap process, in cmd.ExtraFiles order from 3.
const (
	fdCtlIn   = 3 // host -> zygote, kept open for the zygote
	fdCtlOut  = 4 // zygote -> host, kept open for the zygote
	fdSeccomp = 5
	fdInfo    = 6
)

// The sandbox user. Its id inside the user namespace; outside it is the
// plugin's own uid.
const (
	sandboxUID  = 65534
	sandboxGID  = 65534
	sandboxUser = "sandbox"
	hostname    = "cexec"
)

// Paths inside the sandbox.
const (
	workspaceDir = "/workspace"
	libTarget    = "/cexec/lib"
	shmDir       = "/dev/shm"
	// memEventsTarget is the memory cgroup's count of kills at the limit
	// (runtime.ZygoteConfig.MemoryEvents).
	memEventsTarget = "/cexec/memory.events"
)

// systemDirs are shown read-only from the host, as bind mounts or, where the
// host has a symlink (merged /usr), as the same symlink.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the host's /etc entries programs need: the dynamic linker's
// cache, name service and time zone settings, TLS certificates,
// alternatives, MIME types and service names. Missing ones are skipped.
// Sandboxes see a copy of them (see etcView); passwd, group and hosts are
// generated instead.
var etcFiles = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/timezone", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
	"/etc/alternatives", "/etc/mime.types", "/etc/protocols", "/etc/services",
	"/etc/fonts", "/etc/os-release",
}

// reservedPrefixes may not be mount targets: they hold the sandbox's
// system, its runtime or kernel interfaces.
var reservedPrefixes = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/sys", "/tmp", "/run", libTarget}

// reservedTarget says why path cannot be a mount target, or "".
func reservedTarget(path string) string {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return "not an absolute, clean path"
	}
	if path == "/" || path == "/cexec" {
		return "would hide the sandbox's system"
	}
	for _, p := range reservedPrefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return "reserved for the sandbox's system (" + p + ")"
		}
	}
	return ""
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// boxSpec is a validated CreateRequest with the backend's defaults applied.
type boxSpec struct {
	id      string
	tenant  string
	network bool
	mounts  []sandbox.Mount // sources resolved, sorted parents first
	env     map[string]string
	limits  sandbox.Limits
	rlimits runtime.Rlimits
	// runAs is the host uid and gid bwrap runs as: the request's (its
	// tenant's), else run_as when the plugin is root; nil for the
	// plugin's own user.
	runAs *[2]uint32
}

// checkRequest validates req and applies the defaults of s.
func checkRequest(s *settings, req sandbox.CreateRequest) (*boxSpec, error) {
	if !idPattern.MatchString(req.ID) {
		return nil, fmt.Errorf("sandbox id %q: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", req.ID)
	}
	if req.Network && !s.allowNetwork {
		return nil, fmt.Errorf("network access was requested but this backend's allow_network is false")
	}
	spec := &boxSpec{id: req.ID, tenant: req.Tenant, network: req.Network, env: map[string]string{}, limits: req.Limits, runAs: s.runAs}
	if u := req.RunAs; u != nil {
		switch {
		case u.UID == 0 || u.GID == 0:
			return nil, fmt.Errorf("run_as %d:%d: sandboxes never run as root", u.UID, u.GID)
		case s.allowedUIDs != nil && (u.UID < s.allowedUIDs[0] || u.UID > s.allowedUIDs[1] || u.GID < s.allowedUIDs[0] || u.GID > s.allowedUIDs[1]):
			return nil, fmt.Errorf("run_as %d:%d: outside this backend's allowed_uids %d-%d", u.UID, u.GID, s.allowedUIDs[0], s.allowedUIDs[1])
		case s.runAs == nil && (int(u.UID) != os.Geteuid() || int(u.GID) != os.Getegid()):
			return nil, fmt.Errorf("run_as %d:%d: the plugin does not run as root, so sandboxes can only run as its own user", u.UID, u.GID)
		case s.runAs != nil:
			spec.runAs = &[2]uint32{u.UID, u.GID}
		}
	}
	seen := map[string]bool{}
	for _, m := range req.Mounts {
		if why := reservedTarget(m.Target); why != "" {
			return nil, fmt.Errorf("mount target %q: %s", m.Target, why)
		}
		if seen[m.Target] {
			return nil, fmt.Errorf("mount target %q given twice", m.Target)
		}
		seen[m.Target] = true
		if !filepath.IsAbs(m.Source) {
			return nil, fmt.Errorf("mount source %q is not an absolute path", m.Source)
		}
		src, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return nil, fmt.Errorf("mount source: %w", err)
		}
		spec.mounts = append(spec.mounts, sandbox.Mount{Source: src, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	// Parents before children, so that a mount inside another one is not
	// hidden by it.
	sort.SliceStable(spec.mounts, func(i, j int) bool {
		return strings.Count(spec.mounts[i].Target, "/") < strings.Count(spec.mounts[j].Target, "/")
	})
	for k, v := range req.Env {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("environment variable %q: invalid name or value", k)
		}
		spec.env[k] = v
	}
	l := &spec.limits
	for _, d := range []struct {
		v   *int64
		def int64
	}{{&l.MemoryBytes, s.memory}, {&l.Pids, s.pids}, {&l.OutputBytes, s.output}, {&l.TmpBytes, s.tmp}, {&l.ShmBytes, s.shm}, {&l.CPUsMilli, s.cpusMilli}} {
		if *d.v < 0 {
			return nil, fmt.Errorf("negative limit")
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if l.Timeout <= 0 {
		l.Timeout = s.timeout
	}
	spec.rlimits = runtime.Rlimits{FileSize: s.maxFile}
	if l.FileBytes > 0 {
		spec.rlimits.FileSize = l.FileBytes
	}
	return spec, nil
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// zygoteConfig is how the runtime is started in this backend's sandboxes.
func zygoteConfig(s *settings, spec *boxSpec, dirs boxDirs) runtime.ZygoteConfig {
	zc := runtime.ZygoteConfig{
		Python:   s.python,
		LibDir:   libTarget,
		Workdir:  workspaceDir,
		Preload:  s.preload,
		Scratch:  []string{"/tmp", shmDir},
		Rlimits:  spec.rlimits,
		CtlIn:    fdCtlIn,
		CtlOut:   fdCtlOut,
		SitePath: dirs.sitePath,
	}
	if dirs.memEvents != "" {
		zc.MemoryEvents, zc.MemoryLimit = memEventsTarget, spec.limits.MemoryBytes
	}
	return zc
}

// bwrapArgs is the bubblewrap command line (without the binary) of a
// sandbox whose runtime is installed at dirs.lib on the host. sources are the
// paths bwrap binds spec.mounts from (see stagedSources).
func bwrapArgs(s *settings, spec *boxSpec, dirs boxDirs, sources []string) []string {
	a := []string{
		"--unshare-all", "--unshare-user",
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxGID),
		"--hostname", hostname,
		"--die-with-parent", "--new-session", "--as-pid-1",
		"--cap-drop", "ALL",
	}
	if spec.network {
		a = append(a, "--share-net")
	}
	if s.hasDisableUserns() {
		a = append(a, "--disable-userns")
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	if s.pythonPrefix != "" {
		a = append(a, "--ro-bind", s.pythonPrefix, s.pythonPrefix)
	}
	for _, p := range s.roPaths {
		a = append(a, "--ro-bind", p, p)
	}
	// Last of the host's paths: a read-only path holding the interpreter
	// would hide it.
	if dirs.interp != "" {
		a = append(a, "--ro-bind", dirs.interp, s.python)
	}
	a = append(a, "--ro-bind", dirs.etc, "/etc")
	if spec.network {
		a = append(a, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
	)
	if s.hasTmpfsSize() {
		a = append(a, "--size", strconv.FormatInt(spec.limits.TmpBytes, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
	// bwrap's /dev has a /dev/shm directory on its unbounded tmpfs.
	if s.hasTmpfsSize() {
		a = append(a, "--size", strconv.FormatInt(spec.limits.ShmBytes, 10))
	}
	a = append(a, "--tmpfs", shmDir)
	haveWorkspace := false
	for i, m := range spec.mounts {
		op := "--bind"
		if m.ReadOnly {
			op = "--ro-bind"
		}
		a = append(a, op, sources[i], m.Target)
		haveWorkspace = haveWorkspace || m.Target == workspaceDir
	}
	if !haveWorkspace {
		// Programs still get a working directory, private to the sandbox.
		if s.hasTmpfsSize() {
			a = append(a, "--size", strconv.FormatInt(spec.limits.TmpBytes, 10))
		}
		a = append(a, "--tmpfs", workspaceDir)
	}
	a = append(a, "--ro-bind", dirs.lib, libTarget)
	if dirs.memEvents != "" {
		// Read-only, one file: the count of the sandbox's own kills.
		a = append(a, "--ro-bind", dirs.memEvents, memEventsTarget)
	}
	a = append(a, "--remount-ro", "/", "--chdir", workspaceDir, "--clearenv")

	zc := zygoteConfig(s, spec, dirs)
	env := zc.Env()
	env["USER"], env["LOGNAME"] = sandboxUser, sandboxUser
	for k, v := range spec.env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a = append(a, "--setenv", k, env[k])
	}
	a = append(a, "--seccomp", strconv.Itoa(fdSeccomp), "--info-fd", strconv.Itoa(fdInfo), "--")
	return append(a, zc.Command()...)
}

// Generated /etc files: only the sandbox user exists.
var (
	passwdData = fmt.Sprintf("%s:x:%d:%d:cexec sandbox:/tmp:/usr/sbin/nologin\n", sandboxUser, sandboxUID, sandboxGID)
	groupData  = fmt.Sprintf("%s:x:%d:\n", sandboxUser, sandboxGID)
	hostsData  = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n"
)

// prepareMounts makes the mounts usable by the sandbox's host user when the
// plugin runs as root and sandboxes as run_as: a read-write source directory
// that run_as cannot write is handed to run_as (the directory itself, not
// its contents, which stay as they are). Read-only sources run_as cannot
// read get a warning.
func prepareMounts(spec *boxSpec) pluginapi.Diagnostics {
	if spec.runAs == nil {
		return nil
	}
	var diags pluginapi.Diagnostics
	uid, gid := spec.runAs[0], spec.runAs[1]
	for _, m := range spec.mounts {
		fi, err := os.Stat(m.Source)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		need := uint32(0o4)
		if fi.IsDir() {
			need |= 0o1
		}
		if !m.ReadOnly {
			need |= 0o2
		}
		if permits(st, uid, gid, need) {
			continue
		}
		if !m.ReadOnly && fi.IsDir() {
			if err := os.Chown(m.Source, int(uid), int(gid)); err == nil {
				diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Summary: "Workspace handed to the sandbox user",
					Detail: fmt.Sprintf("%s is now owned by %d:%d, the host user sandboxes run as because the plugin runs as root", m.Source, uid, gid)})
				continue
			}
		}
		diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Summary: "Mount not accessible in the sandbox",
			Detail: fmt.Sprintf("%s (at %s) is not accessible to uid %d, the host user sandboxes run as because the plugin runs as root", m.Source, m.Target, uid)})
	}
	return diags
}

// permits reports whether the mode bits of st grant need (a mask of 4, 2, 1)
// to uid:gid.
func permits(st *syscall.Stat_t, uid, gid, need uint32) bool {
	mode := st.Mode & 0o777
	switch {
	case st.Uid == uid:
		return (mode>>6)&need == need
	case st.Gid == gid:
		return (mode>>3)&need == need
	}
	return mode&need == need
}
