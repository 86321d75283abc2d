package catalog

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchExit calls onExit once the process pid exits, without reaping it (the
// stdio transport's Close does that). It polls a pidfd next to a pipe whose
// closing, by the returned stop function, ends the watch early. It returns
// an error when pidfds are unavailable (kernels before 5.3); the connection
// then notices a dead server on its next call instead.
func watchExit(pid int, onExit func()) (stop func(), err error) {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = unix.Close(pfd)
		return nil, err
	}
	go func() {
		defer unix.Close(pfd)
		defer r.Close()
		fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}, {Fd: int32(r.Fd()), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil && fds[0].Revents != 0 {
				onExit()
			}
			return
		}
	}()
	return func() { _ = w.Close() }, nil
}

// setProcAttrs makes the server die with the daemon even if the daemon is
// killed without a chance to stop it.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
