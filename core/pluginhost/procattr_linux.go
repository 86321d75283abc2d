package pluginhost

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill a plugin when the daemon dies without
// stopping it (SIGKILL, crash), so no orphan keeps its resources. Linux ties
// the signal to the forking thread, which the Go runtime keeps alive unless a
// goroutine exits while locked to it; should that ever happen, the plugin is
// killed and the supervisor restarts it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
