// Package bwrapproc kills a bubblewrap process without orphaning the
// sandbox's first process.
//
// bwrap (bubblewrap.c) clones the sandbox's first process, reports it on
// --info-fd, and only then lets it go on by writing an eventfd the child
// waits on; the child sets its own parent death signal (--die-with-parent)
// later still. Killed in between, bwrap leaves the child blocked in
// eventfd_read for ever, reparented to pid 1 and in none of our cgroups.
// Killing bwrap sooner, or by a death signal, would not help: its death is
// what orphans the child.
package bwrapproc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kill kills bwrap process p and, before it, its children. bwrap is
// stopped first: stopped, it can neither clone nor reap, so the children
// found are all it has and their pids stay theirs. exited, when not nil,
// is closed once p has been waited for.
func Kill(p *os.Process, exited <-chan struct{}) {
	// Signals go through the process's pidfd: no pid reuse.
	if p.Signal(syscall.SIGSTOP) == nil && waitStopped(p.Pid, exited) {
		for _, c := range ChildPIDs(p.Pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	}
	_ = p.Kill()
}

// waitStopped waits briefly until process pid, which is not yet waited for
// unless exited is closed, is stopped, and reports whether it is.
func waitStopped(pid int, exited <-chan struct{}) bool {
	deadline := time.Now().Add(time.Second)
	for {
		select {
		case <-exited:
			return false
		default:
		}
		switch s, _ := Stat(pid); s {
		case 'T', 't':
			return true
		case 0, 'Z', 'X':
			return false
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// Stat returns the state and the parent pid of a process from
// /proc/<pid>/stat, or 0 and 0.
func Stat(pid int) (state byte, ppid int) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// pid (comm) state ppid ...; comm may hold anything, even ")".
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid
}

// ChildPIDs lists the children of process ppid. /proc/<pid>/task/*/children
// needs CONFIG_PROC_CHILDREN, so every process's parent is read instead.
func ChildPIDs(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == ppid {
			continue
		}
		if _, pp := Stat(pid); pp == ppid {
			out = append(out, pid)
		}
	}
	return out
}
