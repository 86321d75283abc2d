package plugintest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestProcessesWith(t *testing.T) {
	token := fmt.Sprintf("plugintest-procs-%d", os.Getpid())
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 # "+token)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if pids := processesWith(token); !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("processesWith = %v, want %d among them", pids, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if pids := waitGone(token, 5*time.Second); len(pids) != 0 {
		t.Errorf("processes %v still reported after the kill", pids)
	}
}
