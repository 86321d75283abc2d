package pluginhost

import (
	"os/exec"
	"testing"
	"time"
)

// TestWaitProcessExit: waitProcessExit returns once the process has exited,
// not while it lives, and leaves it for its parent to reap.
func TestWaitProcessExit(t *testing.T) {
	for _, tt := range []struct {
		name string
		// before is what happens to the process before the wait starts.
		before func(t *testing.T, cmd *exec.Cmd)
	}{
		{"exits during the wait", func(*testing.T, *exec.Cmd) {}},
		{"exited, not reaped", func(t *testing.T, cmd *exec.Cmd) {
			kill(t, cmd)
			for !exitedUnreaped(cmd.Process.Pid) {
				time.Sleep(time.Millisecond)
			}
		}},
		{"reaped", func(t *testing.T, cmd *exec.Cmd) {
			kill(t, cmd)
			_ = cmd.Wait()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "300")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			pid := cmd.Process.Pid
			tt.before(t, cmd)
			done := make(chan bool, 1)
			go func() { done <- waitProcessExit(pid) }()
			if cmd.ProcessState == nil && !exitedUnreaped(pid) {
				select {
				case <-done:
					t.Fatal("waitProcessExit returned while the process lives")
				case <-time.After(200 * time.Millisecond):
				}
				kill(t, cmd)
			}
			select {
			case ok := <-done:
				if !ok {
					t.Fatal("waitProcessExit could not tell: no pidfd")
				}
			case <-time.After(time.Minute):
				t.Fatal("waitProcessExit still waits a minute after the process exited")
			}
			if cmd.ProcessState == nil && !exitedUnreaped(pid) {
				t.Error("the process was reaped by the wait")
			}
		})
	}
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
}
