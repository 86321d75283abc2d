package bwrap

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// Config is the plugin's block in cexec.hcl, as the host decodes it against
// configSchema.
type Config struct {
	Python       string   `json:"python"`
	Bwrap        string   `json:"bwrap"`
	AllowNetwork bool     `json:"allow_network"`
	MemoryMB     int64    `json:"memory_mb"`
	Pids         int64    `json:"pids"`
	ExecTimeout  string   `json:"exec_timeout"`
	OutputKB     int64    `json:"output_kb"`
	TmpMB        int64    `json:"tmp_mb"`
	ShmMB        int64    `json:"shm_mb"`
	CPUs         float64  `json:"cpus"`
	MaxFileMB    int64    `json:"max_file_mb"`
	Cgroups      string   `json:"cgroups"`
	CgroupParent string   `json:"cgroup_parent"`
	Preload      []string `json:"preload"`
	ROPaths      []string `json:"ro_paths"`
	RunAsUID     *int64   `json:"run_as_uid"`
	RunAsGID     *int64   `json:"run_as_gid"`
	AllowedUIDs  string   `json:"allowed_uids"`
}

// Defaults of Config.
const (
	defaultPython   = "/usr/bin/python3"
	defaultBwrap    = "bwrap"
	defaultMemoryMB = 512
	defaultPids     = 128
	defaultTimeout  = 30 * time.Second
	defaultOutputKB = 1024
	defaultTmpMB    = 64
	defaultShmMB    = 64
	defaultRunAs    = 65534
)

var configSchema = pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
	{Name: "python", Type: "string", Description: "Python interpreter run in sandboxes; resolved to its real path and refused when it is a script such as a pyenv shim. Default /usr/bin/python3."},
	{Name: "bwrap", Type: "string", Description: "bubblewrap binary, a path or a name looked up in PATH. Default bwrap."},
	{Name: "allow_network", Type: "bool", Description: "Let sandboxes that ask for network share the host's network. Default false: sandboxes get no network at all."},
	{Name: "memory_mb", Type: "number", Description: "Default memory limit of a sandbox in MiB (cgroup, else RLIMIT_AS per process). Default 512."},
	{Name: "pids", Type: "number", Description: "Default limit on processes and threads in a sandbox. Default 128."},
	{Name: "exec_timeout", Type: "string", Description: "Default wall-clock limit of one execution, a Go duration such as \"30s\". Default 30s."},
	{Name: "output_kb", Type: "number", Description: "Default cap on the stdout plus stderr of one execution in KiB. Default 1024."},
	{Name: "tmp_mb", Type: "number", Description: "Default size of a sandbox's /tmp in MiB. Default 64."},
	{Name: "shm_mb", Type: "number", Description: "Default size of a sandbox's /dev/shm in MiB (its pages count towards the sandbox's memory). Default 64."},
	{Name: "cpus", Type: "number", Description: "Default CPU limit in CPUs, for example 0.5 (cgroup cpu controller). Default: no limit."},
	{Name: "max_file_mb", Type: "number", Description: "Largest file a program may write, in MiB (RLIMIT_FSIZE). Default: no limit."},
	{Name: "cgroups", Type: "string", Description: "\"auto\" (default) to limit memory and processes with cgroups v2 or v1 when they are writable, \"off\" to use rlimits only."},
	{Name: "cgroup_parent", Type: "string", Description: "Cgroup to create sandbox cgroups in, as a path within the hierarchy like those of /proc/self/cgroup (for example /system.slice/cexecd.service/sandboxes), for a delegated cgroups v2 subtree. Default: the plugin's own cgroup."},
	{Name: "preload", Type: "list(string)", Description: "Python modules a warm sandbox imports before its first execution. Default: typing, re, json, collections, datetime and similar."},
	{Name: "ro_paths", Type: "list(string)", Description: "Extra host directories to show read-only at the same path inside sandboxes, for example an interpreter installed under /opt."},
	{Name: "run_as_uid", Type: "number", Description: "Host uid sandboxes run as when the plugin runs as root (never as root itself: that would let programs change kernel settings and device files). Default 65534."},
	{Name: "run_as_gid", Type: "number", Description: "Host gid sandboxes run as when the plugin runs as root. Default 65534."},
	{Name: "allowed_uids", Type: "string", Description: "Inclusive range \"FIRST-LAST\" of host uids (and gids) a sandbox request may ask to run as (cexecd sends each tenant's own, from cexec.tenant_uids); requests outside it are refused. Default: any but root."},
}}

var modulePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// settings is a validated Config.
type settings struct {
	python       string // resolved real path
	pythonPrefix string // non-empty when the interpreter lives outside /usr
	bwrap        string
	bwrapVersion [3]int
	allowNetwork bool
	memory       int64
	pids         int64
	timeout      time.Duration
	output       int64
	tmp          int64
	shm          int64
	cpusMilli    int64
	maxFile      int64
	cgroups      bool
	cgroupParent string
	preload      []string
	roPaths      []string
	// allowedUIDs bounds the users requests may name, when set.
	allowedUIDs *[2]uint32
	// runAs is the host uid and gid of sandboxes when the plugin is root
	// and the request names no user of its own; nil when the plugin is
	// not root (sandboxes then run as the plugin's own user).
	runAs *[2]uint32
}

// features of the installed bubblewrap that the arguments depend on.
func (s *settings) hasTmpfsSize() bool     { return versionAtLeast(s.bwrapVersion, 0, 7, 0) }
func (s *settings) hasDisableUserns() bool { return versionAtLeast(s.bwrapVersion, 0, 8, 0) }

func versionAtLeast(v [3]int, major, minor, patch int) bool {
	want := [3]int{major, minor, patch}
	for i := range v {
		if v[i] != want[i] {
			return v[i] > want[i]
		}
	}
	return true
}

// decodeConfig checks a Config and resolves its paths. Problems come back as
// diagnostics that name the attribute.
func decodeConfig(ctx context.Context, raw json.RawMessage) (*settings, pluginapi.Diagnostics) {
	var c Config
	if diags := pluginapi.DecodeConfig("sandbox-bwrap", raw, &c); diags.HasErrors() {
		return nil, diags
	}
	s := &settings{
		allowNetwork: c.AllowNetwork,
		memory:       orDefault(c.MemoryMB, defaultMemoryMB) << 20,
		pids:         orDefault(c.Pids, defaultPids),
		timeout:      defaultTimeout,
		output:       orDefault(c.OutputKB, defaultOutputKB) << 10,
		tmp:          orDefault(c.TmpMB, defaultTmpMB) << 20,
		shm:          orDefault(c.ShmMB, defaultShmMB) << 20,
		cpusMilli:    int64(c.CPUs * 1000),
		maxFile:      c.MaxFileMB << 20,
		cgroups:      true,
		cgroupParent: c.CgroupParent,
		preload:      c.Preload,
	}
	diags := s.checkLimits(&c)
	diags = append(diags, s.checkPaths(&c)...)
	if os.Geteuid() == 0 {
		diags = append(diags, s.checkRunAs(&c)...)
	}
	diags = append(diags, s.resolveBinaries(ctx, &c)...)
	return s, diags
}

// checkLimits validates the limits, the cgroup settings and the preload
// list, and sets the timeout and whether cgroups are used.
func (s *settings) checkLimits(c *Config) pluginapi.Diagnostics {
	var diags pluginapi.Diagnostics
	for _, n := range []struct {
		name string
		v    int64
	}{{"memory_mb", c.MemoryMB}, {"pids", c.Pids}, {"output_kb", c.OutputKB}, {"tmp_mb", c.TmpMB}, {"shm_mb", c.ShmMB}, {"max_file_mb", c.MaxFileMB}} {
		if n.v < 0 {
			diags = append(diags, pluginapi.Errorf(n.name, "Invalid "+n.name, "must not be negative"))
		}
	}
	if c.CPUs < 0 {
		diags = append(diags, pluginapi.Errorf("cpus", "Invalid cpus", "must not be negative"))
	}
	if c.ExecTimeout != "" {
		d, err := time.ParseDuration(c.ExecTimeout)
		if err != nil || d <= 0 {
			diags = append(diags, pluginapi.Errorf("exec_timeout", "Invalid exec_timeout", fmt.Sprintf("%q is not a positive duration such as \"30s\"", c.ExecTimeout)))
		}
		s.timeout = d
	}
	switch c.Cgroups {
	case "", "auto":
	case "off":
		s.cgroups = false
	default:
		diags = append(diags, pluginapi.Errorf("cgroups", "Invalid cgroups", fmt.Sprintf("%q: use \"auto\" or \"off\"", c.Cgroups)))
	}
	if c.CgroupParent != "" && !filepath.IsAbs(c.CgroupParent) {
		diags = append(diags, pluginapi.Errorf("cgroup_parent", "Invalid cgroup_parent", "must be a path within the cgroup hierarchy starting with /, like those in /proc/self/cgroup"))
	}
	if c.AllowedUIDs != "" {
		first, last, ok := parseIDRange(c.AllowedUIDs)
		if !ok || first == 0 || first > last {
			diags = append(diags, pluginapi.Errorf("allowed_uids", "Invalid allowed_uids", fmt.Sprintf("%q is not a range of host uids above 0 such as \"200000-265535\"", c.AllowedUIDs)))
		} else {
			s.allowedUIDs = &[2]uint32{first, last}
		}
	}
	for _, m := range c.Preload {
		if !modulePattern.MatchString(m) {
			diags = append(diags, pluginapi.Errorf("preload", "Invalid preload module", fmt.Sprintf("%q is not a Python module name", m)))
		}
	}
	return diags
}

// checkPaths resolves ro_paths, refusing those over the sandbox's own
// directories.
func (s *settings) checkPaths(c *Config) pluginapi.Diagnostics {
	var diags pluginapi.Diagnostics
	for _, p := range c.ROPaths {
		real, err := filepath.EvalSymlinks(p)
		switch {
		case !filepath.IsAbs(p):
			diags = append(diags, pluginapi.Errorf("ro_paths", "Invalid ro_paths entry", fmt.Sprintf("%q is not an absolute path", p)))
		case err != nil:
			diags = append(diags, pluginapi.Errorf("ro_paths", "Invalid ro_paths entry", err.Error()))
		case reservedTarget(real) != "":
			diags = append(diags, pluginapi.Errorf("ro_paths", "Invalid ro_paths entry", fmt.Sprintf("%q: %s", p, reservedTarget(real))))
		default:
			s.roPaths = append(s.roPaths, real)
		}
	}
	return diags
}

// checkRunAs sets the ids sandboxes run as when the plugin is root.
func (s *settings) checkRunAs(c *Config) pluginapi.Diagnostics {
	var diags pluginapi.Diagnostics
	ids := [2]uint32{defaultRunAs, defaultRunAs}
	for i, v := range []*int64{c.RunAsUID, c.RunAsGID} {
		name := [2]string{"run_as_uid", "run_as_gid"}[i]
		switch {
		case v == nil:
		case *v <= 0 || *v > 1<<31-1:
			diags = append(diags, pluginapi.Errorf(name, "Invalid "+name, "must be a positive id: sandboxes never run as root"))
		default:
			ids[i] = uint32(*v)
		}
	}
	s.runAs = &ids
	return diags
}

// resolveBinaries finds the Python interpreter and bubblewrap.
func (s *settings) resolveBinaries(ctx context.Context, c *Config) pluginapi.Diagnostics {
	var diags pluginapi.Diagnostics
	python := c.Python
	if python == "" {
		python = defaultPython
	}
	real, prefix, err := resolvePython(ctx, python)
	if err != nil {
		diags = append(diags, pluginapi.Errorf("python", "Unusable Python interpreter", err.Error()))
	}
	s.python, s.pythonPrefix = real, prefix

	bw := c.Bwrap
	if bw == "" {
		bw = defaultBwrap
	}
	path, version, err := resolveBwrap(ctx, bw)
	if err != nil {
		// Not fatal: Capabilities reports the backend as unavailable, so
		// a config that merely names this plugin still loads everywhere.
		diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Attribute: "bwrap",
			Summary: "bubblewrap is not usable", Detail: err.Error()})
	}
	s.bwrap, s.bwrapVersion = path, version
	return diags
}

// parseIDRange reads "FIRST-LAST".
func parseIDRange(text string) (uint32, uint32, bool) {
	a, b, found := strings.Cut(text, "-")
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	return uint32(first), uint32(last), found && err1 == nil && err2 == nil
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// resolvePython returns the interpreter's real path, refusing scripts (a
// pyenv shim would exec whatever the caller's environment selects, which
// inside a sandbox is nothing), and the installation prefix when it is
// outside /usr, which sandboxes then need to see.
func resolvePython(ctx context.Context, python string) (string, string, error) {
	if !filepath.IsAbs(python) {
		p, err := exec.LookPath(python)
		if err != nil {
			return "", "", err
		}
		python = p
	}
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return "", "", err
	}
	f, err := os.Open(real)
	if err != nil {
		return "", "", err
	}
	var magic [4]byte
	_, err = f.Read(magic[:])
	f.Close()
	if err != nil || string(magic[:]) != "\x7fELF" {
		return "", "", fmt.Errorf("%s (resolved from %s) is not an ELF executable; a pyenv shim or wrapper script cannot run in a sandbox, name the real interpreter such as /usr/bin/python3", real, python)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, real, "-I", "-S", "-c", "import sys;print(sys.base_prefix);print(sys.version_info[0]*100+sys.version_info[1])")
	cmd.Env = []string{"LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("run %s: %w", real, err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		return "", "", fmt.Errorf("%s printed %q, not its prefix and version", real, out)
	}
	if v, _ := strconv.Atoi(lines[1]); v < 309 {
		return "", "", fmt.Errorf("%s is Python %d.%d; the runtime needs 3.9 or newer", real, v/100, v%100)
	}
	prefix := lines[0]
	if prefix == "/usr" || strings.HasPrefix(prefix, "/usr/") {
		prefix = ""
	}
	if prefix != "" && !strings.HasPrefix(real, prefix+"/") {
		return "", "", fmt.Errorf("%s has its prefix %s elsewhere; install it in one directory tree", real, prefix)
	}
	return real, prefix, nil
}

var bwrapVersionRe = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// resolveBwrap finds bubblewrap and its version.
func resolveBwrap(ctx context.Context, name string) (string, [3]int, error) {
	var v [3]int
	path, err := exec.LookPath(name)
	if err != nil {
		return "", v, fmt.Errorf("%s not found (install the bubblewrap package): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", v, fmt.Errorf("%s --version: %w", path, err)
	}
	m := bwrapVersionRe.FindStringSubmatch(string(out))
	if m == nil {
		return "", v, fmt.Errorf("%s --version printed %q", path, strings.TrimSpace(string(out)))
	}
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	if !versionAtLeast(v, 0, 4, 0) {
		return "", v, fmt.Errorf("%s is bubblewrap %d.%d.%d; 0.4.0 or newer is needed", path, v[0], v[1], v[2])
	}
	return path, v, nil
}
