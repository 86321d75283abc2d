package plugintest

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// waitGone waits up to d for every process whose command line contains
// token to end, and returns those still running then. Killing is
// asynchronous, so a process may take a moment to go.
func waitGone(token string, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		pids := processesWith(token)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesWith lists the processes of this machine whose command line
// contains token; zombies, whose command line is empty, are gone already.
func processesWith(token string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(token)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
