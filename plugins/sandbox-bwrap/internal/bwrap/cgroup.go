package bwrap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupFS describes where the cgroup controllers this plugin uses live.
// A hybrid machine (v1 controllers next to an empty v2 hierarchy) uses v1.
type cgroupFS struct {
	v2 bool
	// parent is the directory that holds sandbox cgroups, one per
	// controller on v1 (key = controller) or one under "" on v2.
	parent map[string]string
	// own is the plugin's own cgroup per v1 controller, where a launching
	// thread returns to (see sandboxCgroup.enter).
	own map[string]string
}

// limits a sandbox cgroup enforces.
type cgroupLimits struct {
	memory    int64
	pids      int64
	cpusMilli int64
}

// sandboxCgroup is one sandbox's cgroup (one directory per v1 controller).
type sandboxCgroup struct {
	v2   bool
	dirs []string
	// home[i] is the plugin's own cgroup of the controller of dirs[i] (v1).
	home []string
	// entered is set once bwrap started in the cgroup (see enter).
	entered bool
	// memDir is the directory of the memory controller's cgroup.
	memDir string
}

// mountInfo is one line of /proc/self/mountinfo, reduced to what matters.
type mountInfo struct {
	root, point, fstype, super string
}

func readMountInfo(path string) ([]mountInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		out = append(out, mountInfo{root: a[3], point: a[4], fstype: b[0], super: b[2]})
	}
	return out, sc.Err()
}

// readProcCgroup maps controllers (and "" for the v2 hierarchy) to this
// process's cgroup path.
func readProcCgroup(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// cgroupDir joins a mount and a cgroup path, allowing for mounts of a
// subtree (containers mount their own cgroup as the root).
func cgroupDir(m mountInfo, cgPath string) string {
	rel := cgPath
	if m.root != "/" {
		rel = strings.TrimPrefix(cgPath, m.root)
	}
	return filepath.Join(m.point, rel)
}

// detectCgroups finds writable memory and pids controllers and creates the
// plugin's parent cgroup(s) named name below the plugin's own cgroup, or
// below override when set. The error says plainly why cgroups cannot be
// used; the caller falls back to rlimits.
func detectCgroups(procRoot, name, override string) (*cgroupFS, error) {
	mounts, err := readMountInfo(filepath.Join(procRoot, "self/mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	own, err := readProcCgroup(filepath.Join(procRoot, "self/cgroup"))
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	v1 := map[string]mountInfo{}
	var unified *mountInfo
	for i, m := range mounts {
		switch m.fstype {
		case "cgroup":
			for _, opt := range strings.Split(m.super, ",") {
				if opt == "memory" || opt == "pids" || opt == "cpu" {
					v1[opt] = m
				}
			}
		case "cgroup2":
			if unified == nil {
				unified = &mounts[i]
			}
		}
	}
	if _, ok := v1["memory"]; ok {
		return setupV1(v1, own, name, override)
	}
	if unified != nil {
		return setupV2(*unified, own, name, override)
	}
	return nil, errors.New("no cgroup filesystem is mounted")
}

func setupV1(mounts map[string]mountInfo, own map[string]string, name, override string) (*cgroupFS, error) {
	fs := &cgroupFS{parent: map[string]string{}, own: map[string]string{}}
	for _, c := range []string{"memory", "pids", "cpu"} {
		m, ok := mounts[c]
		if !ok {
			if c == "cpu" {
				continue
			}
			return nil, fmt.Errorf("cgroup v1 %s controller is not mounted", c)
		}
		base := cgroupDir(m, own[c])
		if override != "" {
			base = filepath.Join(m.point, override)
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			if c == "cpu" {
				continue
			}
			fs.remove()
			return nil, fmt.Errorf("cgroup v1 %s controller is not writable: %w", c, err)
		}
		fs.parent[c] = dir
		fs.own[c] = cgroupDir(m, own[c])
	}
	return fs, nil
}

func setupV2(m mountInfo, own map[string]string, name, override string) (*cgroupFS, error) {
	base := cgroupDir(m, own[""])
	if override != "" {
		base = filepath.Join(m.point, override)
	}
	avail, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	have := strings.Fields(string(avail))
	for _, c := range []string{"memory", "pids"} {
		if !contains(have, c) {
			return nil, fmt.Errorf("cgroup v2: the %s controller is not available in %s", c, base)
		}
	}
	enable := "+memory +pids"
	if contains(have, "cpu") {
		enable += " +cpu"
	}
	// Controllers can only be handed down from a cgroup without processes
	// of its own; a delegated cgroup (systemd Delegate=yes, or
	// cgroup_parent) is set up like that.
	if err := writeFile(filepath.Join(base, "cgroup.subtree_control"), enable); err != nil {
		return nil, fmt.Errorf("cgroup v2: cannot enable controllers below %s (%w); run cexecd in a delegated cgroup or set cgroup_parent", base, err)
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), enable); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w", dir, err)
	}
	return &cgroupFS{v2: true, parent: map[string]string{"": dir}}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// create makes the cgroup of sandbox id with its limits.
func (fs *cgroupFS) create(id string, lim cgroupLimits) (*sandboxCgroup, error) {
	cg := &sandboxCgroup{v2: fs.v2}
	type setting struct{ file, value string }
	var plan map[string][]setting
	// pids.max counts bwrap too, which starts in the cgroup (see enter).
	if fs.v2 {
		s := []setting{{"memory.max", strconv.FormatInt(lim.memory, 10)}, {"memory.swap.max", "0"}, {"pids.max", strconv.FormatInt(lim.pids+1, 10)}}
		if lim.cpusMilli > 0 {
			s = append(s, setting{"cpu.max", fmt.Sprintf("%d 100000", lim.cpusMilli*100)})
		}
		plan = map[string][]setting{"": s}
	} else {
		plan = map[string][]setting{
			// memsw after the plain limit: it may not be below it.
			"memory": {{"memory.limit_in_bytes", strconv.FormatInt(lim.memory, 10)}, {"memory.memsw.limit_in_bytes", strconv.FormatInt(lim.memory, 10)}},
			"pids":   {{"pids.max", strconv.FormatInt(lim.pids+1, 10)}},
		}
		if lim.cpusMilli > 0 {
			plan["cpu"] = []setting{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", strconv.FormatInt(lim.cpusMilli*100, 10)}}
		}
	}
	for ctrl, settings := range plan {
		parent, ok := fs.parent[ctrl]
		if !ok {
			if ctrl == "cpu" {
				continue
			}
			cg.remove()
			return nil, fmt.Errorf("no %s cgroup", ctrl)
		}
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		cg.dirs = append(cg.dirs, dir)
		cg.home = append(cg.home, fs.own[ctrl])
		if fs.v2 || ctrl == "memory" {
			cg.memDir = dir
		}
		for _, s := range settings {
			err := writeFile(filepath.Join(dir, s.file), s.value)
			if err != nil && (errors.Is(err, os.ErrNotExist) && (s.file == "memory.memsw.limit_in_bytes" || s.file == "memory.swap.max")) {
				continue // no swap accounting on this kernel
			}
			if err != nil {
				cg.remove()
				return nil, fmt.Errorf("set %s in %s: %w", s.file, dir, err)
			}
		}
	}
	return cg, nil
}

// enter makes the next process the calling OS thread starts (bwrap) begin
// in the cgroup, so that the cgroup namespace bwrap creates is rooted there
// and /proc/self/cgroup in the sandbox names no host cgroup. On v1 it moves
// the thread itself (through "tasks"), and leave moves it back before
// anything could kill the cgroup's processes, which include the plugin
// while the thread is inside; on v2 cmd is cloned into the cgroup
// (CLONE_INTO_CGROUP). When the thread cannot be moved, enter does nothing:
// the sandbox then sees its cgroup's path, as add moves it afterwards.
func (cg *sandboxCgroup) enter(cmd *exec.Cmd) (leave func() error, err error) {
	if cg.v2 {
		f, err := os.Open(cg.dirs[0])
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(f.Fd())
		cg.entered = true
		return f.Close, nil
	}
	move := func(dirs []string) error {
		for _, d := range dirs {
			// "0" is the calling thread; named so, the kernel moves it
			// without the global lock a migration by id takes.
			if err := writeFile(filepath.Join(d, "tasks"), "0"); err != nil {
				return err
			}
		}
		return nil
	}
	// Moving home first proves the thread can go back.
	if move(cg.home) != nil {
		return func() error { return nil }, nil
	}
	if err := move(cg.dirs); err != nil {
		return nil, errors.Join(fmt.Errorf("move the launching thread into the sandbox's cgroup: %w", err), move(cg.home))
	}
	cg.entered = true
	return func() error { return move(cg.home) }, nil
}

// add moves a process into the cgroup.
func (cg *sandboxCgroup) add(pid int) error {
	for _, dir := range cg.dirs {
		if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move process %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// eventsFile is the memory cgroup's file whose oom_kill line counts the
// kernel's kills at the limit (runtime.ZygoteConfig.MemoryEvents).
func (cg *sandboxCgroup) eventsFile() string {
	if cg.v2 {
		return filepath.Join(cg.memDir, "memory.events")
	}
	return filepath.Join(cg.memDir, "memory.oom_control")
}

// kill sends SIGKILL to every process in the cgroup.
func (cg *sandboxCgroup) kill() {
	for _, dir := range cg.dirs {
		if cg.v2 && writeFile(filepath.Join(dir, "cgroup.kill"), "1") == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			// Never the plugin: a launching thread may be in the cgroup
			// for a moment (see enter), and v1 lists it by its process.
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// remove kills what is left in the cgroup and deletes it, waiting briefly
// for killed processes to go away.
func (cg *sandboxCgroup) remove() error {
	var last error
	for _, dir := range cg.dirs {
		last = nil
		for i := 0; i < 200; i++ {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				last = nil
				break
			}
			last = err
			cg.kill()
			time.Sleep(5 * time.Millisecond)
		}
	}
	if last != nil {
		return fmt.Errorf("remove cgroup: %w", last)
	}
	return nil
}

// remove deletes the plugin's parent cgroups, and any sandbox cgroups left
// in them by an earlier run of the plugin that was killed.
func (fs *cgroupFS) remove() {
	for _, dir := range fs.parent {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				cg := &sandboxCgroup{v2: fs.v2, dirs: []string{filepath.Join(dir, e.Name())}}
				_ = cg.remove()
			}
		}
		_ = os.Remove(dir)
	}
}

// removeStale deletes parent cgroups named prefix<pid> whose plugin
// process no longer exists, next to the current one.
func (fs *cgroupFS) removeStale(prefix string) {
	for _, dir := range fs.parent {
		siblings, _ := os.ReadDir(filepath.Dir(dir))
		for _, s := range siblings {
			pid, err := strconv.Atoi(strings.TrimPrefix(s.Name(), prefix))
			if !s.IsDir() || !strings.HasPrefix(s.Name(), prefix) || err != nil || pid == os.Getpid() {
				continue
			}
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				continue // that plugin is still running
			}
			stale := &cgroupFS{v2: fs.v2, parent: map[string]string{"": filepath.Join(filepath.Dir(dir), s.Name())}}
			stale.remove()
		}
	}
}
