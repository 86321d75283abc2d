package plugintest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestProcessesWith(t *testing.T) {
	token := fmt.Sprintf("plugintest-procs-%d", os.Getpid())
	// Two commands: given one, dash execs it in place of the shell, and
	// the token leaves the process's command line.
	cmd := exec.Command("/bin/sh", "-c", "sleep 30; exit # "+token)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if pids := processesWith(token); !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("processesWith = %v, want %d among them", pids, cmd.Process.Pid)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the shell and its sleep
	_ = cmd.Wait()
	if pids := waitGone(token, 5*time.Second); len(pids) != 0 {
		t.Errorf("processes %v still reported after the kill", pids)
	}
}
