//go:build !linux

package pluginhost

import (
	"os/exec"
	"syscall"
)

// setProcAttr has nothing to add outside Linux but a process group (see the
// Linux version); there is no parent-death signal, and Stop ends the
// plugins.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup SIGKILLs the process group that the plugin with this pid leads.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// exitedUnreaped is false: without /proc a zombie cannot be told apart.
func exitedUnreaped(int) bool { return false }

// waitProcessExit cannot tell when a process exits without reaping it here.
func waitProcessExit(int) bool { return false }
