package runtime

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

//go:embed python/*.py python/cexec/*.py
var pythonFiles embed.FS

// Files returns the runtime's Python package, rooted so that it contains
// cexec/__init__.py and the other modules. Backends that cannot use Install
// (for example ones that upload files into a VM) copy these.
func Files() fs.FS {
	sub, err := fs.Sub(pythonFiles, "python")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// Install writes the runtime's Python package into dir (created if needed),
// which the backend then mounts read-only at ZygoteConfig.LibDir. When
// python is not empty, the modules are also byte-compiled with it so that
// sandboxes do not compile them at every start; python must be the
// interpreter the sandboxes run.
func Install(ctx context.Context, dir, python string) error {
	err := fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := fs.ReadFile(Files(), p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("install runtime in %s: %w", dir, err)
	}
	if python == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-m", "compileall", "-q", dir)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("byte-compile runtime with %s: %w: %s", python, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InstallTemp installs the runtime, as Install does, into a new temporary
// directory named by pattern (see os.MkdirTemp) and returns it. The
// directory is readable by every user whatever the umask, since sandboxes
// run as another user (or a VM's file server reads it); on failure nothing
// is left behind. The backend removes the directory when it closes.
func InstallTemp(ctx context.Context, pattern, python string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("install sandbox runtime: %w", err)
	}
	err = os.Chmod(dir, 0o755)
	if err == nil {
		err = Install(ctx, dir, python)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("install sandbox runtime: %w", err)
	}
	return dir, nil
}

// DefaultPreload lists the modules a zygote imports while idle, beyond the
// runtime itself: what generated tool stubs and typical programs import, so
// forked executions do not pay for them. Chosen to keep an idle zygote
// within about 15 MiB RSS. json is here because the runtime itself no
// longer imports it (cexec._codec), so that a fresh sandbox is ready
// sooner; programs still find it imported.
var DefaultPreload = []string{
	"typing", "re", "json", "collections", "datetime", "math", "base64", "csv",
	"pathlib", "random", "textwrap", "string",
}

// DefaultPath is ZygoteConfig.Path's default: the tenant's workspace
// before the shared /cexec tree (see ZygoteConfig.Path).
var DefaultPath = []string{"/workspace", "/cexec"}

// DefaultPackages is ZygoteConfig.Packages' default: StandardPackages of
// /workspace and /cexec.
var DefaultPackages = StandardPackages("/workspace", "/cexec")

// StandardPackages are the packages a sandbox whose tenant workspace is
// workspace and whose shared tree is shared fixes at zygote start: servers
// only from the shared stub tree, skills from the tenant's skills first, so
// that a tenant's skill wins over a shared one of the same name, as the
// daemon's skill listing reports.
func StandardPackages(workspace, shared string) map[string][]string {
	return map[string][]string{
		"servers": {path.Join(shared, "servers")},
		"skills":  {path.Join(workspace, "skills"), path.Join(shared, "skills")},
	}
}

// Rlimits are per-process limits the zygote applies to every execution.
// Zero leaves a limit unchanged. Backends use them where cgroups are not
// available.
type Rlimits struct {
	AddressSpace int64
	Processes    int64
	FileSize     int64
	OpenFiles    int64
}

// ZygoteConfig describes how the zygote is started inside a sandbox. Paths
// are as seen inside the sandbox.
type ZygoteConfig struct {
	// Python is the interpreter; default /usr/bin/python3.
	Python string
	// LibDir is where Install's directory is mounted; default /cexec/lib.
	LibDir string
	// Path is appended to sys.path, in order, after the interpreter's
	// standard library and site-packages (LibDir comes before them all);
	// default /workspace, then /cexec. Last, so that a module a program
	// leaves in the workspace (statistics.py, say) cannot replace the
	// standard library's in later executions.
	Path []string
	// Packages are packages whose directories the zygote fixes before any
	// program runs (name → directories, first wins), so that no file in a
	// Path entry (a workspace's servers/__init__.py, say) can replace them;
	// default DefaultPackages.
	Packages map[string][]string
	// Workdir is the programs' working directory; default /workspace.
	Workdir string
	// Preload lists modules imported while idle; nil means DefaultPreload.
	Preload []string
	// Scratch lists directories private to the sandbox (its /tmp and
	// /dev/shm tmpfs) that the zygote empties before an execution of
	// another session than the previous one's, and persistent
	// interpreters of other sessions end then: a warm sandbox carries no
	// files (and no tmpfs memory) from one session to the next. Only for
	// sandboxes: the zygote deletes everything below them.
	Scratch []string
	Rlimits Rlimits
	// CtlIn and CtlOut are the zygote's control descriptors (host to zygote
	// and zygote to host); default 3 and 4.
	CtlIn, CtlOut int
	// StdioControl puts the control channel on the zygote's stdin and
	// stdout instead, for backends that can only give it stdio (a remote
	// exec). Programs still never see it: their stdin is /dev/null, their
	// stdout and stderr fresh pipes.
	StdioControl bool
	// OwnsPidNamespace tells a zygote that is not pid 1 that its pid
	// namespace holds nothing but itself, its programs and a pid 1 that
	// only reaps (a container's idle main process, where the zygote comes
	// in by a remote exec): it then kills every leftover process after an
	// execution, as the namespace's init does.
	OwnsPidNamespace bool
	// MemoryEvents, when set, is a file in the sandbox whose "oom_kill N"
	// line counts the processes the kernel killed at the sandbox's memory
	// limit (the memory cgroup's memory.events on v2, memory.oom_control
	// on v1, a microVM's /proc/vmstat), or several ':'-separated, of which
	// the first that exists counts. A program killed by SIGKILL while the
	// count rose then gets a MemoryError naming MemoryLimit rather than
	// "killed by SIGKILL (possibly out of memory)".
	MemoryEvents string
	MemoryLimit  int64
	// SitePath, when set, starts the interpreter without its site module
	// (-S) and appends these directories to sys.path in its place: the
	// ones site would add, as SitePath found them. Site's other work, and
	// the code that .pth files of the host run at every interpreter start,
	// would cost each new sandbox about 1.5 ms. Only for an interpreter the
	// host can run itself; nil keeps site.
	SitePath []string
}

func (c ZygoteConfig) withDefaults() ZygoteConfig {
	if c.Python == "" {
		c.Python = "/usr/bin/python3"
	}
	if c.LibDir == "" {
		c.LibDir = "/cexec/lib"
	}
	if c.Path == nil {
		c.Path = DefaultPath
	}
	if c.Packages == nil {
		c.Packages = DefaultPackages
	}
	if c.Workdir == "" {
		c.Workdir = "/workspace"
	}
	if c.Preload == nil {
		c.Preload = DefaultPreload
	}
	switch {
	case c.StdioControl:
		c.CtlIn, c.CtlOut = 0, 1
	case c.CtlIn == 0 && c.CtlOut == 0:
		c.CtlIn, c.CtlOut = 3, 4
	}
	return c
}

// bootstrap runs in `python -I -c`: isolated mode ignores PYTHON*
// variables and the current directory, so the runtime puts its own
// directory on sys.path. A -c string is used rather than a script because
// scripts are never byte-compiled.
const bootstrap = "import sys;sys.path.insert(0,sys.argv[1]);from cexec._zygote import main;main(sys.argv[2:])"

// Command returns the zygote's command line.
func (c ZygoteConfig) Command() []string {
	c = c.withDefaults()
	args := []string{c.Python, "-I", "-B", "-c", bootstrap, c.LibDir}
	if len(c.SitePath) > 0 {
		args = slices.Insert(args, 2, "-S")
	}
	for _, p := range c.SitePath {
		args = append(args, "--site-path", p)
	}
	for _, p := range c.Path {
		args = append(args, "--path", p)
	}
	// One argument per directory, so that a backend that maps guest paths
	// to others (a test double) can rewrite them.
	for _, name := range slices.Sorted(maps.Keys(c.Packages)) {
		args = append(args, "--package", name)
		for _, d := range c.Packages[name] {
			args = append(args, "--package-dir", d)
		}
	}
	args = append(args, "--cwd", c.Workdir)
	if len(c.Preload) > 0 {
		args = append(args, "--preload", strings.Join(c.Preload, ","))
	}
	for _, d := range c.Scratch {
		args = append(args, "--scratch", d)
	}
	for _, l := range []struct {
		name string
		v    int64
	}{{"as", c.Rlimits.AddressSpace}, {"nproc", c.Rlimits.Processes}, {"fsize", c.Rlimits.FileSize}, {"nofile", c.Rlimits.OpenFiles}} {
		if l.v > 0 {
			args = append(args, "--rlimit", l.name+"="+strconv.FormatInt(l.v, 10))
		}
	}
	if c.OwnsPidNamespace {
		args = append(args, "--sweep-namespace", "1")
	}
	if c.MemoryEvents != "" {
		args = append(args, "--memory-events", c.MemoryEvents, "--memory-limit", strconv.FormatInt(c.MemoryLimit, 10))
	}
	return append(args, "--ctl-in", strconv.Itoa(c.CtlIn), "--ctl-out", strconv.Itoa(c.CtlOut))
}

// Env returns the environment programs should see for Python to behave as
// the runtime does, also in Python subprocesses: the same module path (the
// runtime's sitecustomize appends CEXEC_PATH after the standard library and
// fixes CEXEC_PACKAGES, while PYTHONSAFEPATH and PYTHONNOUSERSITE keep the
// working directory and ~/.local off sys.path, so that nothing a program
// leaves in the workspace or /tmp is imported in place of a library), no
// bytecode written into the workspace, UTF-8.
func (c ZygoteConfig) Env() map[string]string {
	c = c.withDefaults()
	return map[string]string{
		"PYTHONPATH":              c.LibDir,
		"PYTHONSAFEPATH":          "1",
		"PYTHONNOUSERSITE":        "1",
		"CEXEC_PATH":              strings.Join(c.Path, ":"),
		"CEXEC_PACKAGES":          c.packagesEnv(),
		"PYTHONDONTWRITEBYTECODE": "1",
		"PYTHONIOENCODING":        "utf-8",
		"LANG":                    "C.UTF-8",
		"PATH":                    "/usr/local/bin:/usr/bin:/bin",
		"TMPDIR":                  "/tmp",
		"HOME":                    "/tmp",
	}
}

// packagesEnv is Packages as CEXEC_PACKAGES: "name=dir:dir;name=dir".
func (c ZygoteConfig) packagesEnv() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(c.Packages)) {
		parts = append(parts, name+"="+strings.Join(c.Packages[name], ":"))
	}
	return strings.Join(parts, ";")
}
