package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// create is `msb create`: it records a sandbox and makes its root, a tree
// of symlinks from guest paths to the mounts' host sources.
func create(args []string) int {
	r, f, code := createRecord(args)
	if r == nil {
		return code
	}
	return locked(func() int { return boot(r, f) })
}

// createRecord parses create's arguments into the sandbox's record; nil and
// the exit status when they are wrong.
func createRecord(args []string) (*record, *flags, int) {
	f, bad := parseFlags(args, map[string]string{
		"--name": "name", "-n": "name", "--cpus": "cpus", "-c": "cpus", "--memory": "memory", "-m": "memory",
		"--mount-dir": "mount-dir", "--mount-file": "mount-file", "--volume": "mount-dir", "-v": "mount-dir",
		"--tmpfs": "tmpfs", "--workdir": "workdir", "-w": "workdir", "--env": "env", "-e": "env",
		"--label": "label", "--mkdir": "mkdir",
	}, map[string]string{"--no-net": "no-net", "--quiet": "quiet", "-q": "quiet", "--replace": "replace"})
	if f == nil {
		return nil, nil, unknownFlag("create", bad, "msb create [OPTIONS] [IMAGE]")
	}
	if len(f.pos) != 1 {
		return nil, nil, usageError("error: the following required arguments were not provided:\n  <IMAGE>", "msb create [OPTIONS] [IMAGE]")
	}
	name := f.last("name")
	if name == "" {
		name = fmt.Sprintf("sandbox-%d", time.Now().UnixNano()%100000)
	}
	if len(name) > 128 {
		return nil, nil, fail("invalid config: sandbox name exceeds 128 bytes")
	}
	r := &record{Name: name, Status: "Running", CreatedAt: time.Now().UTC(), Image: f.pos[0], CPUs: 1, MemoryMiB: 512,
		Labels: map[string]string{}, NoNet: f.bools["no-net"], Workdir: f.last("workdir")}
	if v := f.last("cpus"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, nil, usageError(fmt.Sprintf("error: invalid value '%s' for '--cpus <CPUS>': invalid digit found in string", v), "msb create [OPTIONS] [IMAGE]")
		}
		r.CPUs = n
	}
	if v := f.last("memory"); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSuffix(v, "M"), "MiB"))
		if err != nil {
			return nil, nil, fail(fmt.Sprintf("invalid memory size: %s", v))
		}
		r.MemoryMiB = n
	}
	for _, e := range f.values["env"] {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, nil, fail(fmt.Sprintf("invalid environment variable (expected KEY=value): %s", e))
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
				return nil, nil, fail(fmt.Sprintf("--%s must be in format source:/guest[:options]", kind))
			}
			src, dst := spec[:i], spec[i+1:]
			ro := false
			if g, opts, ok := strings.Cut(dst, ":"); ok {
				dst, ro = g, opts == "ro"
			}
			fi, err := os.Stat(src)
			if err != nil {
				return nil, nil, fail(fmt.Sprintf("invalid config: mount source %s does not exist", src))
			}
			if fi.IsDir() != (kind == "mount-dir") {
				return nil, nil, fail(fmt.Sprintf("invalid config: mount source %s is not a %s", src, strings.TrimPrefix(kind, "mount-")))
			}
			r.Mounts = append(r.Mounts, mount{Type: "Bind", Host: src, Guest: dst, ReadOnly: ro})
		}
	}
	for _, t := range f.values["tmpfs"] {
		p, size, _ := strings.Cut(t, ":")
		n, _ := strconv.Atoi(strings.TrimSuffix(size, "M"))
		r.Mounts = append(r.Mounts, mount{Type: "Tmpfs", Guest: p, SizeMiB: n})
	}
	return r, f, 0
}

// boot stores the record of a new sandbox and makes its root, holding the
// state lock, and fails as a VM that cannot boot here would.
func boot(r *record, f *flags) int {
	name := r.Name
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
}
