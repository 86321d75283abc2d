// Command fakemsb is a stand-in for microsandbox's msb 0.7 CLI in the
// sandbox-microsandbox tests, for machines that cannot boot microVMs. It
// reproduces what the backend relies on of the real CLI, as msb 0.7.2
// prints it: the JSON of list, inspect and metrics, the "error: ..." lines
// with "→" hints on stderr, exit status 1 for its own errors and 2 for
// rejected arguments, doctor's checks, and exec --stream passing the
// command's exit status on.
//
// There is no VM and no isolation: create records the sandbox under
// $MSB_HOME and exec runs the command on this machine, with the guest
// paths of the sandbox's mounts rewritten to their host sources in its
// arguments, environment and working directory (read-only mounts are not
// enforced). Stopping a sandbox kills what its exec sessions started, as a
// VM's end would.
//
// Test knobs: FAKEMSB_CPUINFO and FAKEMSB_KVM replace /proc/cpuinfo and
// /dev/kvm in doctor's checks (a boot fails whenever doctor would);
// FAKEMSB_BOOT_FAIL=1 makes boots fail like a VM that dies at start;
// FAKEMSB_BOOT_DELAY (a Go duration) makes a successful boot take that
// long; FAKEMSB_VERSION replaces the version --version prints.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const version = "0.7.2"

func main() {
	os.Exit(run(os.Args[1:]))
}

// logFlags are msb's global diagnostic flags, accepted anywhere.
var logFlags = map[string]bool{"--error": true, "--warn": true, "--info": true, "--debug": true, "--trace": true}

func run(args []string) int {
	var rest []string
	for i, a := range args {
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if !logFlags[a] {
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		return usageError("error: 'msb' requires a subcommand but one was not provided", "msb [OPTIONS] <COMMAND>")
	}
	cmd, args := rest[0], rest[1:]
	switch cmd {
	case "--version", "-V":
		fmt.Println("msb " + envOr("FAKEMSB_VERSION", version))
		return 0
	case "doctor":
		return doctor()
	case "create":
		return create(args)
	case "exec":
		return execCmd(args)
	case "stop":
		return stop(args)
	case "remove", "rm":
		return remove(args)
	case "list", "ls":
		return list(args)
	case "inspect":
		return inspect(args)
	case "metrics":
		return metrics(args)
	}
	return usageError(fmt.Sprintf("error: unrecognized subcommand '%s'", cmd), "msb [OPTIONS] <COMMAND>")
}

// usageError prints a clap-style usage error and returns 2.
func usageError(msg, usage string) int {
	fmt.Fprintf(os.Stderr, "%s\n\nUsage: %s\n\nFor more information, try '--help'.\n", msg, usage)
	return 2
}

// fail prints msb's error block and returns 1.
func fail(msg string, hints ...string) int {
	fmt.Fprintf(os.Stderr, "error: %s\n", msg)
	for _, h := range hints {
		fmt.Fprintf(os.Stderr, "  → %s\n", h)
	}
	return 1
}

// flags parses "--flag value", "-f value", "--flag=value" and booleans.
type flags struct {
	values map[string][]string
	bools  map[string]bool
	pos    []string
	after  []string // after "--"
}

// parseFlags parses args against the value flags and boolean flags of a
// command (aliases map to canonical names); it returns the unknown flag.
func parseFlags(args []string, valued, boolean map[string]string) (*flags, string) {
	f := &flags{values: map[string][]string{}, bools: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			f.after = args[i+1:]
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			f.pos = append(f.pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		if c, ok := valued[name]; ok {
			if !hasVal {
				if i+1 >= len(args) {
					return nil, a
				}
				i++
				val = args[i]
			}
			f.values[c] = append(f.values[c], val)
			continue
		}
		if c, ok := boolean[a]; ok {
			f.bools[c] = true
			continue
		}
		return nil, a
	}
	return f, ""
}

func (f *flags) last(name string) string {
	v := f.values[name]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func unknownFlag(cmd, flag, usage string) int {
	return usageError(fmt.Sprintf("error: unexpected argument '%s' found\n\n  tip: to pass '%s' as a value, use '-- %s'", flag, flag, flag), usage)
}

// problems lists what doctor finds wrong, as the real one checks it.
func problems() [][]string {
	var out [][]string
	cpuinfo := envOr("FAKEMSB_CPUINFO", "/proc/cpuinfo")
	data, _ := os.ReadFile(cpuinfo)
	hasVirt := false
	for _, w := range strings.Fields(string(data)) {
		if w == "vmx" || w == "svm" {
			hasVirt = true
		}
	}
	if !hasVirt {
		out = append(out, []string{"CPU virtualization is not available", "no vmx (Intel) or svm (AMD) flag in /proc/cpuinfo",
			"enable virtualization (VT-x / AMD-V) in your BIOS or UEFI firmware", "inside a VM, enable nested virtualization on the host"})
	}
	kvm := envOr("FAKEMSB_KVM", "/dev/kvm")
	if _, err := os.Stat(kvm); err != nil {
		out = append(out, []string{"/dev/kvm is not present", "the KVM kernel module is not loaded",
			"in containers or CI, the host must expose /dev/kvm to this environment"})
	} else if f, err := os.OpenFile(kvm, os.O_RDWR, 0); err != nil {
		out = append(out, []string{"/dev/kvm could not be opened", fmt.Sprintf("opening /dev/kvm failed: %v", err)})
	} else {
		f.Close()
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func home() string {
	if h := os.Getenv("MSB_HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return filepath.Join(h, ".microsandbox")
}

func doctor() int {
	self, _ := os.Executable()
	probs := problems()
	fmt.Fprintf(os.Stderr, "info Platform: Linux x86_64\ninfo Version: v%s\ninfo MSB_HOME: %s\n", version, home())
	fmt.Fprintf(os.Stderr, "   ✓ msb          %s\n", self)
	mark := func(ok bool) string {
		if ok {
			return "✓"
		}
		return "✗"
	}
	virt, kvm := true, true
	for _, p := range probs {
		if strings.HasPrefix(p[0], "CPU") {
			virt = false
		} else {
			kvm = false
		}
	}
	fmt.Fprintf(os.Stderr, "   %s CPU virt     %s\n", mark(virt), map[bool]string{true: "vmx", false: "not found"}[virt])
	fmt.Fprintf(os.Stderr, "   %s KVM device   %s\n", mark(kvm), map[bool]string{true: "/dev/kvm", false: "missing"}[kvm])
	for _, p := range probs {
		fail(p[0], p[1:]...)
	}
	if len(probs) > 0 {
		return 1
	}
	return 0
}

// record is a sandbox as the fake keeps it.
type record struct {
	Name      string            `json:"name"`
	Status    string            `json:"status"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Image     string            `json:"image"`
	CPUs      int               `json:"cpus"`
	MemoryMiB int               `json:"memory_mib"`
	Env       [][2]string       `json:"env"`
	Mounts    []mount           `json:"mounts"`
	Labels    map[string]string `json:"labels"`
	NoNet     bool              `json:"no_net"`
	Workdir   string            `json:"workdir"`
	Root      string            `json:"root"`
	// Execs are the pids of fake msb exec processes running commands in
	// the sandbox (each a child subreaper of what it started).
	Execs []int `json:"execs"`
}

type mount struct {
	Type     string `json:"type"`
	Host     string `json:"host,omitempty"`
	Guest    string `json:"guest"`
	ReadOnly bool   `json:"readonly"`
	SizeMiB  int    `json:"size_mib,omitempty"`
}

func stateDir() string { return filepath.Join(home(), "fake") }

// locked runs fn holding the state lock.
func locked(fn func() int) int {
	if err := os.MkdirAll(filepath.Join(stateDir(), "sandboxes"), 0o755); err != nil {
		return fail(err.Error())
	}
	f, err := os.OpenFile(filepath.Join(stateDir(), "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fail(err.Error())
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fail(err.Error())
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return fn()
}

func recordPath(name string) string {
	return filepath.Join(stateDir(), "sandboxes", strings.ReplaceAll(name, "/", "_")+".json")
}

func load(name string) (*record, error) {
	data, err := os.ReadFile(recordPath(name))
	if err != nil {
		return nil, err
	}
	var r record
	return &r, json.Unmarshal(data, &r)
}

func save(r *record) error {
	r.UpdatedAt = time.Now().UTC()
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := recordPath(r.Name) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, recordPath(r.Name))
}

func all() []*record {
	paths, _ := filepath.Glob(filepath.Join(stateDir(), "sandboxes", "*.json"))
	var out []*record
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if r, err := load(name); err == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// bootFailure says why a boot fails here, or nil.
func bootFailure() []string {
	if os.Getenv("FAKEMSB_BOOT_FAIL") != "" || len(problems()) > 0 {
		return []string{"other: sandbox process exited (exit status: 1) before agent relay became available"}
	}
	return nil
}

func create(args []string) int {
	f, bad := parseFlags(args, map[string]string{
		"--name": "name", "-n": "name", "--cpus": "cpus", "-c": "cpus", "--memory": "memory", "-m": "memory",
		"--mount-dir": "mount-dir", "--mount-file": "mount-file", "--volume": "mount-dir", "-v": "mount-dir",
		"--tmpfs": "tmpfs", "--workdir": "workdir", "-w": "workdir", "--env": "env", "-e": "env",
		"--label": "label", "--mkdir": "mkdir",
	}, map[string]string{"--no-net": "no-net", "--quiet": "quiet", "-q": "quiet", "--replace": "replace"})
	if f == nil {
		return unknownFlag("create", bad, "msb create [OPTIONS] [IMAGE]")
	}
	if len(f.pos) != 1 {
		return usageError("error: the following required arguments were not provided:\n  <IMAGE>", "msb create [OPTIONS] [IMAGE]")
	}
	name := f.last("name")
	if name == "" {
		name = fmt.Sprintf("sandbox-%d", time.Now().UnixNano()%100000)
	}
	if len(name) > 128 {
		return fail("invalid config: sandbox name exceeds 128 bytes")
	}
	r := &record{Name: name, Status: "Running", CreatedAt: time.Now().UTC(), Image: f.pos[0], CPUs: 1, MemoryMiB: 512,
		Labels: map[string]string{}, NoNet: f.bools["no-net"], Workdir: f.last("workdir")}
	if v := f.last("cpus"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return usageError(fmt.Sprintf("error: invalid value '%s' for '--cpus <CPUS>': invalid digit found in string", v), "msb create [OPTIONS] [IMAGE]")
		}
		r.CPUs = n
	}
	if v := f.last("memory"); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSuffix(v, "M"), "MiB"))
		if err != nil {
			return fail(fmt.Sprintf("invalid memory size: %s", v))
		}
		r.MemoryMiB = n
	}
	for _, e := range f.values["env"] {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return fail(fmt.Sprintf("invalid environment variable (expected KEY=value): %s", e))
		}
		r.Env = append(r.Env, [2]string{k, v})
	}
	for _, l := range f.values["label"] {
		k, v, _ := strings.Cut(l, "=")
		r.Labels[k] = v
	}
	for _, kind := range []string{"mount-dir", "mount-file"} {
		for _, spec := range f.values[kind] {
			i := strings.Index(spec, ":/")
			if i < 0 {
				return fail(fmt.Sprintf("--%s must be in format source:/guest[:options]", kind))
			}
			src, dst := spec[:i], spec[i+1:]
			ro := false
			if g, opts, ok := strings.Cut(dst, ":"); ok {
				dst, ro = g, opts == "ro"
			}
			fi, err := os.Stat(src)
			if err != nil {
				return fail(fmt.Sprintf("invalid config: mount source %s does not exist", src))
			}
			if fi.IsDir() != (kind == "mount-dir") {
				return fail(fmt.Sprintf("invalid config: mount source %s is not a %s", src, strings.TrimPrefix(kind, "mount-")))
			}
			r.Mounts = append(r.Mounts, mount{Type: "Bind", Host: src, Guest: dst, ReadOnly: ro})
		}
	}
	for _, t := range f.values["tmpfs"] {
		p, size, _ := strings.Cut(t, ":")
		n, _ := strconv.Atoi(strings.TrimSuffix(size, "M"))
		r.Mounts = append(r.Mounts, mount{Type: "Tmpfs", Guest: p, SizeMiB: n})
	}
	return locked(func() int {
		if old, err := load(name); err == nil {
			if !f.bools["replace"] {
				return fail("sandbox already exists: " + name)
			}
			killExecs(old)
		}
		r.Root = filepath.Join(stateDir(), "roots", name)
		_ = os.RemoveAll(r.Root)
		for _, m := range r.Mounts {
			if m.Type != "Bind" {
				continue
			}
			link := filepath.Join(r.Root, m.Guest)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				return fail(err.Error())
			}
			if err := os.Symlink(m.Host, link); err != nil {
				return fail(err.Error())
			}
		}
		for _, d := range f.values["mkdir"] {
			if err := os.MkdirAll(filepath.Join(r.Root, d), 0o755); err != nil {
				return fail(err.Error())
			}
		}
		if why := bootFailure(); why != nil {
			r.Status = "Stopped"
			if err := save(r); err != nil {
				return fail(err.Error())
			}
			return fail(fmt.Sprintf("failed to start %q", name), append(why, fmt.Sprintf("run `msb logs --source system %s` for full diagnostics", name))...)
		}
		if err := save(r); err != nil {
			return fail(err.Error())
		}
		if d, err := time.ParseDuration(os.Getenv("FAKEMSB_BOOT_DELAY")); err == nil {
			// msb records the sandbox before its VM is up.
			time.Sleep(d)
		}
		if f.last("name") == "" {
			fmt.Println(name)
		}
		return 0
	})
}

// hostPath maps a guest path to where it lives on this machine: under a
// mount's source, or under the sandbox's root directory when the root has
// its first component (directories holding mount targets, --mkdir ones).
func (r *record) hostPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return p
	}
	best := -1
	for i, m := range r.Mounts {
		if m.Type == "Bind" && (p == m.Guest || strings.HasPrefix(p, m.Guest+"/")) && (best < 0 || len(m.Guest) > len(r.Mounts[best].Guest)) {
			best = i
		}
	}
	if best >= 0 {
		m := r.Mounts[best]
		return m.Host + strings.TrimPrefix(p, m.Guest)
	}
	first := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]
	if first != "" {
		if _, err := os.Lstat(filepath.Join(r.Root, first)); err == nil {
			return filepath.Join(r.Root, p)
		}
	}
	return p
}

// hostList maps each element of a colon-separated path list.
func (r *record) hostList(v string) string {
	parts := strings.Split(v, ":")
	for i, p := range parts {
		parts[i] = r.hostPath(p)
	}
	return strings.Join(parts, ":")
}

func execCmd(args []string) int {
	const usage = "msb exec <NAME> [-- <COMMAND>...]"
	f, bad := parseFlags(args, map[string]string{"--env": "env", "-e": "env", "--workdir": "workdir", "-w": "workdir",
		"--user": "user", "-u": "user", "--timeout": "timeout", "--rlimit": "rlimit"},
		map[string]string{"--stream": "stream", "--quiet": "quiet", "-q": "quiet", "--no-tty": "no-tty", "--tty": "tty", "-t": "tty"})
	if f == nil {
		return unknownFlag("exec", bad, usage)
	}
	if len(f.pos) != 1 {
		return usageError("error: the following required arguments were not provided:\n  <NAME>", usage)
	}
	if f.bools["stream"] && f.bools["tty"] {
		return usageError("error: the argument '--stream' cannot be used with '--tty'", usage)
	}
	name := f.pos[0]
	var r *record
	if code := locked(func() int {
		var err error
		if r, err = load(name); err != nil {
			return fail("sandbox not found: " + name)
		}
		if r.Status != "Running" {
			if why := bootFailure(); why != nil {
				return fail(fmt.Sprintf("failed to start %q", name), append(why, fmt.Sprintf("run `msb logs --source system %s` for full diagnostics", name))...)
			}
			r.Status = "Running"
		}
		r.Execs = append(r.Execs, os.Getpid())
		if err := save(r); err != nil {
			return fail(err.Error())
		}
		return 0
	}); code != 0 {
		return code
	}
	defer locked(func() int {
		if cur, err := load(name); err == nil {
			cur.Execs = removeInt(cur.Execs, os.Getpid())
			_ = save(cur)
		}
		return 0
	})
	if len(f.after) == 0 {
		return 0
	}
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root"}
	for _, kv := range r.Env {
		env[kv[0]] = kv[1]
	}
	for _, e := range f.values["env"] {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return fail(fmt.Sprintf("invalid environment variable (expected KEY=value): %s", e))
		}
		env[k] = v
	}
	argv := make([]string, len(f.after))
	for i, a := range f.after {
		argv[i] = r.hostPath(a)
	}
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		for _, d := range strings.Split(env["PATH"], ":") {
			if c := filepath.Join(r.hostPath(d), prog); isExecutable(c) {
				prog = c
				break
			}
		}
	}
	if !isExecutable(prog) {
		code := 127
		kind, hint := "not found", fmt.Sprintf("is `%s` on PATH inside the sandbox? Try `msb exec ... -- which %s`", f.after[0], f.after[0])
		if _, err := os.Stat(prog); err == nil {
			code, kind, hint = 126, "permission denied", fmt.Sprintf("check the binary's permissions — `chmod +x %s` may be needed", f.after[0])
		}
		fail(fmt.Sprintf("failed to exec %q", f.after[0]), fmt.Sprintf("%s: No such file or directory (os error 2) (ENOENT)", kind), hint)
		return code
	}
	// The fake is the subreaper of what the command leaves behind, so that
	// stopping the sandbox can find it all.
	_ = setSubreaper()
	cmd := exec.Command(prog, argv[1:]...)
	cmd.Args[0] = f.after[0]
	for k, v := range env {
		if k == "PYTHONPATH" || k == "PATH" {
			v = r.hostList(v)
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	wd := f.last("workdir")
	if wd == "" {
		wd = r.Workdir
	}
	if wd != "" {
		cmd.Dir = r.hostPath(wd)
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if f.bools["stream"] {
		cmd.Stdin = os.Stdin
	} else {
		// Buffered exec reads all of stdin before it starts the command.
		data, _ := io.ReadAll(os.Stdin)
		cmd.Stdin = bytes.NewReader(data)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Sprintf("failed to exec %q", f.after[0]), "exec: "+err.Error())
	}
	// A VM's memory bounds everything in it; the fake bounds the address
	// space of the guest command, and so of what it starts, instead.
	mem := uint64(r.MemoryMiB) << 20
	_ = unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: mem, Max: mem}, nil)
	var timeout <-chan time.Time
	if v := f.last("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fail("invalid duration: " + v)
		}
		timeout = time.After(d)
	}
	// msb exec forwards nothing on SIGTERM; it dies and the guest command
	// goes with the session.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		// A stop holds the lock until the sandbox is recorded stopped.
		gone := locked(func() int {
			if cur, err := load(name); err != nil || cur.Status != "Running" {
				return 1
			}
			return 0
		})
		if gone != 0 {
			// The VM went away under the session.
			return fail("exec session ended without exit event")
		}
		return code
	case <-timeout:
		killTree(os.Getpid())
		<-done
		return fail("exec timed out after " + f.last("timeout"))
	case <-sigs:
		killTree(os.Getpid())
		return 130
	}
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func removeInt(xs []int, x int) []int {
	out := xs[:0]
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// setSubreaper makes this process PR_SET_CHILD_SUBREAPER.
func setSubreaper() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// killTree kills every descendant of pid.
func killTree(pid int) {
	for _, c := range descendants(pid) {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 {
			pp, _ := strconv.Atoi(fields[1])
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// killExecs kills everything the sandbox's exec sessions started, as the
// VM's end does; the sessions then end as msb exec does when its VM goes.
func killExecs(r *record) {
	for _, pid := range r.Execs {
		killTree(pid)
	}
	r.Execs = nil
}

func stop(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--timeout": "timeout", "-t": "timeout", "--label": "label"},
		map[string]string{"--force": "force", "-f": "force", "--quiet": "quiet", "-q": "quiet"})
	if f == nil {
		return unknownFlag("stop", bad, "msb stop [OPTIONS] [NAMES]...")
	}
	return locked(func() int {
		code := 0
		for _, name := range f.pos {
			r, err := load(name)
			if err != nil {
				code = fail("sandbox not found: " + name)
				continue
			}
			killExecs(r)
			r.Status = "Stopped"
			if err := save(r); err != nil {
				code = fail(err.Error())
				continue
			}
			if !f.bools["quiet"] {
				fmt.Fprintf(os.Stderr, "   ✓ Stopped      %s\n", name)
			}
		}
		return code
	})
}

func remove(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--label": "label"},
		map[string]string{"--force": "force", "-f": "force", "--quiet": "quiet", "-q": "quiet"})
	if f == nil {
		return unknownFlag("remove", bad, "msb remove [OPTIONS] [NAMES]...")
	}
	return locked(func() int {
		code := 0
		for _, name := range f.pos {
			r, err := load(name)
			if err != nil {
				if !f.bools["quiet"] {
					fail("sandbox not found: " + name)
				}
				code = 1
				continue
			}
			if r.Status == "Running" {
				if !f.bools["force"] {
					if !f.bools["quiet"] {
						fail("sandbox still running: " + name)
					}
					code = 1
					continue
				}
				killExecs(r)
			}
			_ = os.Remove(recordPath(name))
			_ = os.RemoveAll(r.Root)
			if !f.bools["quiet"] {
				fmt.Fprintf(os.Stderr, "   ✓ Removed      %s\n", name)
			}
		}
		return code
	})
}

func hasLabels(r *record, labels []string) bool {
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		if got, ok := r.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func printJSON(v any) int {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(err.Error())
	}
	fmt.Println(string(data))
	return 0
}

func jsonTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000+00:00") }

func list(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--format": "format", "--label": "label"},
		map[string]string{"--running": "running", "--stopped": "stopped", "--quiet": "quiet", "-q": "quiet"})
	if f == nil {
		return unknownFlag("list", bad, "msb list [OPTIONS]")
	}
	if v := f.last("format"); v != "" && v != "json" {
		return usageError(fmt.Sprintf("error: invalid value '%s' for '--format <FORMAT>'\n  [possible values: json]", v), "msb list [OPTIONS]")
	}
	var rows []*record
	for _, r := range all() {
		if !hasLabels(r, f.values["label"]) || f.bools["running"] && r.Status != "Running" || f.bools["stopped"] && r.Status != "Stopped" {
			continue
		}
		rows = append(rows, r)
	}
	if f.last("format") == "json" {
		out := []map[string]any{}
		for _, r := range rows {
			out = append(out, map[string]any{"name": r.Name, "status": r.Status, "created_at": jsonTime(r.CreatedAt), "image": r.Image})
		}
		return printJSON(out)
	}
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "No sandboxes found.")
		return 0
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if f.bools["quiet"] {
		for _, r := range rows {
			fmt.Fprintln(w, r.Name)
		}
		return 0
	}
	fmt.Fprintf(w, "%-40s %-24s %-10s %s\n", "NAME", "IMAGE", "STATUS", "CREATED")
	for _, r := range rows {
		fmt.Fprintf(w, "%-40s %-24s %-10s %s\n", r.Name, r.Image, r.Status, r.CreatedAt.Format(time.RFC3339))
	}
	return 0
}

func inspect(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--format": "format"}, nil)
	if f == nil {
		return unknownFlag("inspect", bad, "msb inspect [OPTIONS] <NAME>")
	}
	if len(f.pos) != 1 {
		return usageError("error: the following required arguments were not provided:\n  <NAME>", "msb inspect <NAME>")
	}
	r, err := load(f.pos[0])
	if err != nil {
		return fail("sandbox not found: " + f.pos[0])
	}
	if f.last("format") != "json" {
		fmt.Printf("Name:    %s\nStatus:  %s\nImage:   %s\nCPUs:    %d\nMemory:  %d MiB\n", r.Name, r.Status, r.Image, r.CPUs, r.MemoryMiB)
		return 0
	}
	env := []map[string]string{}
	for _, kv := range r.Env {
		env = append(env, map[string]string{"key": kv[0], "value": kv[1]})
	}
	mounts := []map[string]any{}
	for _, m := range r.Mounts {
		opts := map[string]bool{"nodev": false, "noexec": false, "nosuid": false, "readonly": m.ReadOnly}
		if m.Type == "Tmpfs" {
			mounts = append(mounts, map[string]any{"type": "Tmpfs", "guest": m.Guest, "size_mib": m.SizeMiB, "options": opts})
			continue
		}
		mounts = append(mounts, map[string]any{"type": "Bind", "host": m.Host, "guest": m.Guest, "options": opts,
			"follow_root_symlinks": false, "host_permissions": "private", "quota_mib": nil, "stat_virtualization": "strict"})
	}
	egress := "allow"
	if r.NoNet {
		egress = "deny"
	}
	var workdir any
	if r.Workdir != "" {
		workdir = r.Workdir
	}
	cfg := map[string]any{
		"deployment_profile": "single_tenant",
		"env":                env,
		"image":              map[string]any{"Oci": map[string]any{"reference": r.Image}},
		"labels":             r.Labels,
		"lifecycle":          map[string]any{"ephemeral": false, "idle_timeout_secs": nil, "max_duration_secs": nil},
		"mounts":             mounts,
		"name":               r.Name,
		"network":            map[string]any{"enabled": true, "policy": map[string]any{"default_egress": egress, "default_ingress": "deny", "rules": []any{}}},
		"resources":          map[string]any{"cpus": r.CPUs, "max_cpus": r.CPUs, "memory_mib": r.MemoryMiB, "max_memory_mib": r.MemoryMiB},
		"runtime":            map[string]any{"cmd": nil, "entrypoint": nil, "hostname": nil, "shell": "/bin/sh", "user": nil, "workdir": workdir},
		"security_profile":   "default",
	}
	return printJSON(map[string]any{"active_config": nil, "config": cfg, "created_at": jsonTime(r.CreatedAt), "name": r.Name,
		"pause": nil, "pending_changes": []any{}, "status": r.Status, "updated_at": jsonTime(r.UpdatedAt)})
}

// rss sums VmRSS over pids, in bytes.
func rss(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				if fs := strings.Fields(v); len(fs) > 0 {
					kb, _ := strconv.ParseInt(fs[0], 10, 64)
					total += kb << 10
				}
			}
		}
	}
	return total
}

func metrics(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--format": "format", "--interval": "interval", "--sort": "sort"},
		map[string]string{"--all": "all", "-a": "all"})
	if f == nil {
		return unknownFlag("metrics", bad, "msb metrics [OPTIONS] [NAME]")
	}
	var reports []map[string]any
	for _, r := range all() {
		if r.Status != "Running" || len(f.pos) == 1 && r.Name != f.pos[0] {
			continue
		}
		var pids []int
		for _, e := range r.Execs {
			pids = append(append(pids, e), descendants(e)...)
		}
		reports = append(reports, map[string]any{"name": r.Name, "state": "running", "cpus": r.CPUs,
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "cpu_percent": 0.0, "vcpu_time_ns": 0,
			"memory_bytes": rss(pids), "memory_available_bytes": int64(r.MemoryMiB) << 20, "memory_host_resident_bytes": rss(pids),
			"memory_limit_bytes": int64(r.MemoryMiB) << 20, "disk_read_bytes": 0, "disk_write_bytes": 0, "net_rx_bytes": 0,
			"net_tx_bytes": 0, "upper_used_bytes": 0, "upper_free_bytes": 0, "upper_host_allocated_bytes": 0,
			"uptime_secs": time.Since(r.CreatedAt).Seconds()})
	}
	if len(f.pos) == 1 {
		if len(reports) == 0 {
			return fail(fmt.Sprintf("no metrics recorded for sandbox %q", f.pos[0]))
		}
		if f.last("format") == "json" {
			return printJSON(reports[0])
		}
	}
	if f.last("format") == "json" {
		if reports == nil {
			reports = []map[string]any{}
		}
		return printJSON(reports)
	}
	for _, r := range reports {
		fmt.Printf("%s\t%v\n", r["name"], r["memory_bytes"])
	}
	return 0
}
