package jqworker

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// setProcAttr makes the kernel kill a worker when cexecd dies without
// stopping it (SIGKILL, crash), so no orphan keeps its memory. Linux ties
// the signal to the forking thread, which the Go runtime keeps alive unless
// a goroutine exits while locked to it; should that happen, the evaluation
// on that worker fails and the next one starts a new worker. The worker
// leads a process group of its own, which kill ends.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// selfExe is the file to start a worker from: the running binary itself,
// which /proc/self/exe stays even after a package upgrade replaced exe on
// disk, so that a worker always speaks its daemon's protocol.
func selfExe(string) string { return "/proc/self/exe" }

// limitMemory lets the process take at most limit more bytes of address
// space than it holds now (RLIMIT_AS), so that the heap cannot grow past
// it: an allocation beyond fails, and the Go runtime ends the process with
// "out of memory". Counting from now leaves out the address space the Go
// runtime (more than a GiB) and the race detector reserve at start, which
// they never fill. RLIMIT_DATA does not hold: Go maps its heap writable
// over address space it reserved without access, and Linux checks such a
// mapping against the limit as if it added nothing, so one allocation can
// overshoot by gigabytes (a worker grew to 960 MiB under a 256 MiB
// RLIMIT_DATA with `"x" * 1e9`).
func limitMemory(limit uint64) error {
	base, err := vmSize("VmSize:")
	if err != nil {
		return err
	}
	lim := syscall.Rlimit{Cur: base + limit, Max: base + limit}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		return fmt.Errorf("limit memory: %w", err)
	}
	return nil
}

// vmSize is a size from /proc/self/status (field "VmSize:"), in bytes.
func vmSize(field string) (uint64, error) {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("limit memory: %w", err)
	}
	for line := range bytes.Lines(st) {
		if rest, ok := bytes.CutPrefix(line, []byte(field)); ok {
			f := bytes.Fields(rest)
			if len(f) == 2 && string(f[1]) == "kB" {
				kb, err := strconv.ParseUint(string(f[0]), 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("limit memory: no %s in /proc/self/status", field)
}
