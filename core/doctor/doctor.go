// Package doctor checks that a machine can run cexecd with a given
// cexec.hcl: the sandbox's needs (bubblewrap, user namespaces, seccomp,
// cgroups, a real Python), the upstream servers' commands and addresses,
// the plugin binaries, the socket's folder and data_dir's free space. Every
// failed check says how to fix it. `cexecd doctor` runs it without a
// daemon; a running daemon runs it too (the control API's Doctor), adding
// what only it knows (upstream and plugin states).
package doctor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Status of a check.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
	Skip = "skip"
)

// Check is one finding.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Fix says what to do, for warn and fail.
	Fix string `json:"fix,omitempty"`
}

// Options adjust where the checks look, for tests.
type Options struct {
	// Path is the PATH commands are looked up in; "" means $PATH.
	Path string
	// ProcRoot and CgroupRoot default to /proc and /sys/fs/cgroup.
	ProcRoot, CgroupRoot string
}

func (o *Options) defaults() {
	if o.Path == "" {
		o.Path = os.Getenv("PATH")
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
}

// lookPath finds a command in o.Path (a path with a slash is taken as is).
func (o *Options) lookPath(cmd string) (string, error) {
	if strings.Contains(cmd, "/") {
		return exec.LookPath(cmd)
	}
	for _, dir := range filepath.SplitList(o.Path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, cmd)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: cmd, Err: exec.ErrNotFound}
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

func ok(name, detail string) Check { return Check{Name: name, Status: OK, Detail: detail} }
func fail(name, detail, fix string) Check {
	return Check{Name: name, Status: Fail, Detail: detail, Fix: fix}
}
func warn(name, detail, fix string) Check {
	return Check{Name: name, Status: Warn, Detail: detail, Fix: fix}
}

// ctxDone is a check's stand-in when ctx ended before it ran.
func ctxDone(ctx context.Context, name string) (Check, bool) {
	if err := ctx.Err(); err != nil {
		return Check{Name: name, Status: Skip, Detail: err.Error()}, true
	}
	return Check{}, false
}
