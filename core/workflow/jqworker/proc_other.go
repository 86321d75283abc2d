//go:build !linux

package jqworker

import (
	"os/exec"
	"syscall"
)

// setProcAttr has nothing to add outside Linux but a process group (see the
// Linux version); there is no parent-death signal, and Close ends the
// workers.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// selfExe is the file to start a worker from: exe, the running binary's
// path.
func selfExe(exe string) string { return exe }

// limitMemory does nothing outside Linux, where the limit is not measured
// from /proc (see the Linux version); GOMEMLIMIT still makes the worker's
// collector hold back, and the time limit still kills it.
func limitMemory(uint64) error { return nil }
