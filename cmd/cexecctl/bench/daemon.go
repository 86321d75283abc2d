package bench

import (
	"os"
	"os/exec"
	"time"
)

// daemon is a started private cexecd. done is closed once it has exited,
// and err then holds what Wait returned: every select on done sees it,
// where a channel carrying the error would give it to the first only (and
// leave a later wait hanging).
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// watch waits for cmd, which has been started, in the background.
func watch(cmd *exec.Cmd) *daemon {
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d
}

// stop interrupts the daemon, gives it grace to exit, then kills it, and
// returns once it has exited.
func (d *daemon) stop(grace time.Duration) {
	select {
	case <-d.done:
		return
	default:
	}
	if grace > 0 {
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.done:
			return
		case <-time.After(grace):
		}
	}
	_ = d.cmd.Process.Kill()
	<-d.done
}
