package testutil

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stop sends SIGSTOP to pid and waits until every thread of the process has
// stopped. kill(2) returns once one thread is woken to begin the group
// stop; until that thread runs, the others go on, so a request sent right
// after kill could still be answered by a "stopped" process.
func Stop(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop process %d: %v", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !allStopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d has threads running 10s after SIGSTOP", pid)
		}
	}
}

// allStopped says whether every thread of pid is stopped.
func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) == 0 || (f[0] != "T" && f[0] != "t") {
			return false
		}
	}
	return true
}
