// Package bwrap is the sandbox-bwrap backend: every sandbox is a
// bubblewrap container (all namespaces unshared, no network unless allowed,
// a read-only minimal system, an unprivileged user, no capabilities, a
// seccomp filter, cgroup or rlimit resource limits) whose first process is
// the standard runtime's zygote.
package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/internal/version"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// cgroupPrefix names the plugin's parent cgroup, followed by its pid.
const cgroupPrefix = "cexec-bwrap-"

// Plugin implements sandbox.Sandbox with bubblewrap.
type Plugin struct {
	log hclog.Logger

	mu       sync.Mutex
	set      *settings
	setDiags pluginapi.Diagnostics
	probed   *availability
	lib      string
	site     *[]string // see sitePath
	// interps maps interpreters to their execute-only copies in
	// interpDir (see interpreter).
	interps   map[string]string
	interpDir string
	stage     string
	cgfs      *cgroupFS
	cgErr     error
	cgDone    bool
	seccomp   map[bool][]byte
	etc       etcView
	boxes     sandbox.Registry[*box]
}

type availability struct {
	ok     bool
	reason string
}

var _ sandbox.Sandbox = (*Plugin)(nil)

// apiVersions are the sandbox API versions the plugin speaks.
var apiVersions = []string{sandbox.APIVersion}

// New returns the backend, configured with defaults until Configure.
func New(log hclog.Logger) *Plugin {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Plugin{log: log, seccomp: map[bool][]byte{}, etc: etcView{log: log}}
}

// Info describes the plugin and its configuration schema.
func (p *Plugin) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         "bwrap",
		Kind:         pluginapi.KindSandbox,
		Version:      version.Version,
		APIVersions:  apiVersions,
		ConfigSchema: configSchema,
	}, nil
}

// Configure applies the plugin's block of cexec.hcl. Sandboxes created
// before keep their settings.
func (p *Plugin) Configure(ctx context.Context, config json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindSandbox, apiVersions, apiVersion); diags != nil {
		return diags, nil
	}
	s, diags := decodeConfig(ctx, config)
	if diags.HasErrors() {
		return diags, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set, p.setDiags, p.probed = s, diags, nil
	if p.cgfs != nil && p.boxes.Len() == 0 {
		p.cgfs.remove()
		p.cgfs = nil
	}
	if p.cgfs == nil {
		p.cgDone = false
	}
	return diags, nil
}

// settings returns the configuration, decoding the defaults when Configure
// was never called (as in a bare test).
func (p *Plugin) settings(ctx context.Context) (*settings, pluginapi.Diagnostics) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil {
		p.set, p.setDiags = decodeConfig(ctx, nil)
	}
	return p.set, p.setDiags
}

// Capabilities reports what this machine allows; Available is false with a
// plain reason when bubblewrap is missing or cannot create sandboxes here.
func (p *Plugin) Capabilities(ctx context.Context) (sandbox.Capabilities, error) {
	s, _ := p.settings(ctx)
	a := p.availability(ctx, s)
	return sandbox.Capabilities{
		Isolation:             "namespaces",
		Network:               s.allowNetwork,
		PersistentInterpreter: true,
		RunAs:                 true,
		HostMounts:            true,
		SessionInterpreter:    true,
		Available:             a.ok,
		UnavailableReason:     a.reason,
	}, nil
}

// availability checks, once per configuration, that a sandbox can start.
func (p *Plugin) availability(ctx context.Context, s *settings) availability {
	p.mu.Lock()
	if p.probed != nil && p.set == s {
		a := *p.probed
		p.mu.Unlock()
		return a
	}
	p.mu.Unlock()
	a := probe(ctx, s)
	p.mu.Lock()
	if p.set == s {
		p.probed = &a
	}
	p.mu.Unlock()
	return a
}

func probe(ctx context.Context, s *settings) availability {
	if s.bwrap == "" {
		return availability{reason: "bubblewrap (bwrap) is not installed or not usable; install the bubblewrap package"}
	}
	if s.python == "" {
		return availability{reason: "no usable Python interpreter; set python to a real interpreter such as /usr/bin/python3"}
	}
	if v, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(v)) == "0" {
		return availability{reason: "user namespaces are disabled on this machine (sysctl user.max_user_namespaces = 0)"}
	}
	if v, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(v)) == "0" && os.Geteuid() != 0 {
		return availability{reason: "unprivileged user namespaces are disabled on this machine (sysctl kernel.unprivileged_userns_clone = 0)"}
	}
	args := []string{"--unshare-all", "--unshare-user", "--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxGID),
		"--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL"}
	for _, d := range systemDirs {
		if fi, err := os.Lstat(d); err == nil {
			if fi.Mode()&os.ModeSymlink != 0 {
				if t, err := os.Readlink(d); err == nil {
					args = append(args, "--symlink", t, d)
				}
			} else if fi.IsDir() {
				args = append(args, "--ro-bind", d, d)
			}
		}
	}
	if s.pythonPrefix != "" {
		args = append(args, "--ro-bind", s.pythonPrefix, s.pythonPrefix)
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--", s.python, "-I", "-S", "-c", "")
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bwrap, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = sysProcAttr(s.runAs)
	// Killed with the plugin between cloning its child and letting it go
	// on, bwrap would orphan that child for ever (see bwrapproc), and no
	// later plugin process would know it for a sandbox of its own. Left
	// alone, the probe ends by itself at once.
	cmd.SysProcAttr.Pdeathsig = 0
	if out, err := cmd.CombinedOutput(); err != nil {
		return availability{reason: fmt.Sprintf("bubblewrap cannot create a sandbox on this machine (%v): %s", err, strings.TrimSpace(string(out)))}
	}
	return availability{ok: true}
}

// libDir installs the runtime once per plugin process.
func (p *Plugin) libDir(ctx context.Context, s *settings) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lib != "" {
		return p.lib, nil
	}
	killStaleSandboxes("cexec-bwrap-runtime-")
	removeStaleTemp("cexec-bwrap-runtime-")
	dir, err := runtime.InstallTemp(ctx, tempPattern("cexec-bwrap-runtime-"), s.python)
	if err != nil {
		return "", err
	}
	p.lib = dir
	return dir, nil
}

// sitePath asks the interpreter once per plugin process which directories
// its site module adds, so that zygotes start without site (see
// runtime.ZygoteConfig.SitePath). When it cannot tell, zygotes keep site.
func (p *Plugin) sitePath(ctx context.Context, s *settings) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.site == nil {
		path, err := runtime.SitePath(ctx, s.python)
		if err != nil {
			p.log.Warn("sandboxes start Python with its site module", "reason", err)
		}
		p.site = &path
	}
	return *p.site
}

// stageDir is an empty directory over which sandbox launches mount their
// staging tmpfs (see launch); created once per plugin process.
func (p *Plugin) stageDir() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stage != "" {
		return p.stage, nil
	}
	removeStaleTemp("cexec-bwrap-stage-")
	dir, err := os.MkdirTemp("", tempPattern("cexec-bwrap-stage-"))
	if err == nil {
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		return "", fmt.Errorf("create staging directory: %w", err)
	}
	p.stage = dir
	return dir, nil
}

// tempPattern names a temporary directory of this plugin process: prefix,
// the pid, then MkdirTemp's random part.
func tempPattern(prefix string) string {
	return prefix + strconv.Itoa(os.Getpid()) + "-*"
}

// removeStaleTemp removes temporary directories that plugin processes
// killed before they could clean up (their pid is gone) left behind.
func removeStaleTemp(prefix string) {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		pidText, _, found := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || !found || err != nil || !e.IsDir() || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // that process still runs
		}
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
				continue // not ours to remove
			}
		}
		_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
	}
}

// killStaleSandboxes kills what is left of sandboxes of plugin processes
// that are gone: processes whose arguments bind a runtime directory named
// prefix<pid>-… (see libDir) of a pid that no longer exists. A plugin
// killed while bwrap had cloned a sandbox but not yet let it go on leaves
// that sandbox blocked for ever (see killBwrap): bwrap dies with the
// plugin (Pdeathsig), the sandbox cannot yet, and no cgroup holds it.
func killStaleSandboxes(prefix string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Opened before the arguments are read, the pidfd cannot reach
		// another process that reuses the pid.
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if staleSandbox(pid, prefix) {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		_ = unix.Close(fd)
	}
}

// staleSandbox reports whether process pid binds a runtime directory of a
// plugin process that is gone.
func staleSandbox(pid int, prefix string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(data), "\x00")
	for i := 0; i+2 < len(args); i++ {
		if args[i] != "--ro-bind" || args[i+2] != libTarget || filepath.Dir(args[i+1]) != filepath.Clean(os.TempDir()) {
			continue
		}
		rest, ok := strings.CutPrefix(filepath.Base(args[i+1]), prefix)
		pidText, _, found := strings.Cut(rest, "-")
		owner, err := strconv.Atoi(pidText)
		if !ok || !found || err != nil || owner <= 0 || owner == os.Getpid() {
			return false
		}
		return errors.Is(syscall.Kill(owner, 0), syscall.ESRCH)
	}
	return false
}

// cgroups returns the plugin's cgroup parent, detecting it once; nil
// means rlimits, and the string says why.
func (p *Plugin) cgroups(s *settings) (*cgroupFS, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !s.cgroups {
		return nil, "cgroups are off in the configuration"
	}
	if !p.cgDone {
		p.cgDone = true
		p.cgfs, p.cgErr = detectCgroups("/proc", cgroupPrefix+strconv.Itoa(os.Getpid()), s.cgroupParent)
		if p.cgfs != nil {
			p.cgfs.removeStale(cgroupPrefix)
		} else {
			p.log.Warn("cgroups unavailable, limiting sandboxes with rlimits", "reason", p.cgErr)
		}
	}
	if p.cgfs == nil {
		return nil, p.cgErr.Error()
	}
	return p.cgfs, ""
}

func (p *Plugin) seccompProgram(network bool) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.seccomp[network]; ok {
		return b, nil
	}
	prog, err := seccompFilter(network)
	if err != nil {
		return nil, err
	}
	b := seccompBytes(prog)
	p.seccomp[network] = b
	return b, nil
}

// Create starts a sandbox and warms its zygote. Invalid requests fail with
// pluginapi.ErrInvalidArgument, an unusable machine with
// pluginapi.ErrUnavailable; warnings (such as limits enforced by rlimits
// only) come back as diagnostics.
func (p *Plugin) Create(ctx context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	s, _ := p.settings(ctx)
	if a := p.availability(ctx, s); !a.ok {
		return nil, fmt.Errorf("create sandbox %s: %w: %s", req.ID, pluginapi.ErrUnavailable, a.reason)
	}
	spec, err := checkRequest(s, req)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w: %v", pluginapi.ErrInvalidArgument, err)
	}
	if err := p.boxes.Reserve(req.ID); err != nil {
		return nil, err
	}
	b, diags, err := p.start(ctx, s, spec)
	if err != nil {
		p.boxes.Release(req.ID)
		return nil, err
	}
	if !p.boxes.Commit(req.ID, b) {
		_ = b.destroy(ctx)
		p.boxes.Release(req.ID)
		return nil, fmt.Errorf("create sandbox %s: %w", req.ID, pluginapi.ErrPluginShutdown)
	}
	return diags, nil
}

func (p *Plugin) start(ctx context.Context, s *settings, spec *boxSpec) (*box, pluginapi.Diagnostics, error) {
	var diags pluginapi.Diagnostics
	lib, err := p.libDir(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	seccomp, err := p.seccompProgram(spec.network)
	if err != nil {
		return nil, nil, err
	}
	var cg *sandboxCgroup
	cgfs, why := p.cgroups(s)
	if cgfs != nil {
		cg, err = cgfs.create(spec.id, cgroupLimits{memory: spec.limits.MemoryBytes, pids: spec.limits.Pids, cpusMilli: spec.limits.CPUsMilli})
		if err != nil {
			return nil, nil, fmt.Errorf("create sandbox %s: %w", spec.id, err)
		}
	} else {
		spec.rlimits.AddressSpace = spec.limits.MemoryBytes
		spec.rlimits.Processes = spec.limits.Pids
		detail := "memory is limited per process (RLIMIT_AS) and processes per user (RLIMIT_NPROC): " + why
		if os.Geteuid() == 0 {
			detail += "; the plugin runs as root, for which the kernel does not enforce RLIMIT_NPROC, so the process limit does not hold"
		}
		diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Summary: "Sandbox limits without cgroups", Detail: detail})
	}
	diags = append(diags, prepareMounts(spec)...)
	if !s.hasTmpfsSize() {
		// Without a size for the tmpfs, at least no single file may grow
		// beyond it.
		if spec.rlimits.FileSize == 0 {
			spec.rlimits.FileSize = spec.limits.TmpBytes
		}
		diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Summary: "Unbounded /tmp",
			Detail: "bubblewrap older than 0.7 cannot cap the size of /tmp; files are limited to its size instead"})
	}
	stageDir, err := p.stageDir()
	if err != nil {
		if cg != nil {
			_ = cg.remove()
		}
		return nil, nil, err
	}
	etc, err := p.etc.acquire(time.Now())
	if err != nil {
		if cg != nil {
			_ = cg.remove()
		}
		return nil, nil, fmt.Errorf("create sandbox %s: %w", spec.id, err)
	}
	dirs := boxDirs{lib: lib, stage: stageDir, etc: etc.dir, sitePath: p.sitePath(ctx, s), interp: p.interpreter(ctx, s.python)}
	if cg != nil {
		dirs.memEvents = cg.eventsFile()
	}
	b, err := startBox(ctx, s, spec, dirs, seccomp, cg, p.log)
	if err != nil {
		// startBox fails only with bwrap gone.
		p.etc.release(etc)
		if cg != nil {
			_ = cg.remove()
		}
		return nil, nil, err
	}
	go func() {
		<-b.exited
		p.etc.release(etc)
	}()
	return b, diags, nil
}

// Exec runs one program in a sandbox. A result with SandboxOK false means
// the sandbox must be destroyed rather than reused.
func (p *Plugin) Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	b, err := p.boxes.Get(req.SandboxID)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	b.busy.Store(true)
	defer b.busy.Store(false)
	b.executions.Add(1)
	res, err := b.runner.Exec(ctx, req, host)
	if err != nil && !errors.Is(err, ctx.Err()) || !res.SandboxOK {
		b.broken.Store(true)
	}
	if err != nil && errors.Is(err, pluginapi.ErrUnavailable) {
		return res, fmt.Errorf("sandbox %s%s: %w", req.SandboxID, b.stderrText(), err)
	}
	return res, err
}

// Destroy kills a sandbox and everything in it and removes its cgroup.
func (p *Plugin) Destroy(ctx context.Context, id string) error {
	b, err := p.boxes.Remove(id)
	if err != nil {
		return err
	}
	return b.destroy(ctx)
}

// List describes the live sandboxes; RSSBytes is each one's memory, the
// PSS of its processes.
func (p *Plugin) List(context.Context) ([]sandbox.Status, error) {
	boxes := p.boxes.All()
	out := make([]sandbox.Status, 0, len(boxes))
	for _, e := range boxes {
		b := e.Box
		out = append(out, sandbox.Status{
			ID: b.id, Tenant: b.tenant, State: b.state(), Created: b.created,
			Executions: b.executions.Load(), RSSBytes: b.memory(),
		})
	}
	return out, nil
}

// Health pings the sandbox's zygote.
func (p *Plugin) Health(ctx context.Context, id string) error {
	b, err := p.boxes.Get(id)
	if err != nil {
		return err
	}
	if b.broken.Load() {
		return fmt.Errorf("sandbox %s must be recycled: an execution left it in an unknown state", id)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := b.runner.Ping(ctx); err != nil {
		return fmt.Errorf("sandbox %s: %v", id, err)
	}
	return nil
}

// Close destroys every sandbox and removes the runtime, the interpreter
// copies and the cgroups.
func (p *Plugin) Close() error {
	var wg sync.WaitGroup
	for _, b := range p.boxes.Close() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = b.destroy(context.Background())
		}()
	}
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cgfs != nil {
		p.cgfs.remove()
		p.cgfs = nil
	}
	if p.lib != "" {
		_ = os.RemoveAll(p.lib)
		p.lib = ""
	}
	if p.stage != "" {
		_ = os.Remove(p.stage)
		p.stage = ""
	}
	if p.interpDir != "" {
		_ = os.RemoveAll(p.interpDir)
		p.interpDir, p.interps = "", nil
	}
	p.etc.close()
	return nil
}
