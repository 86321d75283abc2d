package pluginhost

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcAttr makes the kernel kill a plugin when the daemon dies without
// stopping it (SIGKILL, crash), so no orphan keeps its resources. Linux ties
// the signal to the forking thread, which the Go runtime keeps alive unless a
// goroutine exits while locked to it; should that ever happen, the plugin is
// killed and the supervisor restarts it.
//
// The plugin also leads a process group of its own, so that killGroup can
// end what it spawned: go-plugin sees a plugin exit only once its stdout
// and stderr close, which a child holding them (a wrapper script's, a
// helper server's) would put off for as long as it lives.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// killGroup SIGKILLs the process group that the plugin with this pid leads.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// exitedUnreaped reports whether pid has exited but was not reaped yet: a
// zombie, which go-plugin reaps only after the plugin's pipes close.
func exitedUnreaped(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// waitProcessExit returns once the process pid has exited, without reaping it: a
// pidfd turns readable then, and the runtime's poller waits for that with
// no thread and no polling. It returns at once, false, when the kernel
// cannot say so (no pidfd before Linux 5.3).
func waitProcessExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true // reaped already
	}
	if err != nil {
		return false
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	err = rc.Read(func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return n > 0 || err != nil && err != unix.EINTR
	})
	return err == nil
}
