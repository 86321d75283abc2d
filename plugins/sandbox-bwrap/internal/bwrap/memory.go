package bwrap

import (
	"os"
	"strconv"
	"strings"
)

// maxTreeProcs bounds the process tree memory walks: a program that forks
// thousands of processes (nproc permitting) must not make List slow.
const maxTreeProcs = 256

// treeMemory is what a sandbox holds in memory: the proportional set size
// (PSS) of every process in the tree under root (bwrap's monitor, the
// zygote, its fork server, the spare child, workers, a running program).
// PSS divides each page by the processes sharing it, so the zygote's heap,
// which its children share, counts once, and the interpreter's code, which
// every sandbox maps, a fraction. The zygote's VmRSS alone would leave out
// the fork server and the spare and count the shared code in full.
//
// A process whose smaps_rollup cannot be read (cexecd without
// CAP_SYS_PTRACE; the zygote makes itself non-dumpable) makes the figure
// fall back to fallbackPID's VmRSS, so that it is never a partial sum.
func treeMemory(root, fallbackPID int) int64 {
	var total int64
	for _, pid := range processTree(root) {
		pss, ok := procPSS(pid)
		if !ok {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				continue // ended while we walked
			}
			return procRSS(fallbackPID)
		}
		total += pss
	}
	if total == 0 {
		return procRSS(fallbackPID)
	}
	return total
}

// processTree lists root and its descendants (breadth first, at most
// maxTreeProcs), from each thread's children list in /proc.
func processTree(root int) []int {
	tree := []int{root}
	for i := 0; i < len(tree) && len(tree) < maxTreeProcs; i++ {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(tree[i]) + "/task")
		if err != nil {
			continue
		}
		for _, task := range tasks {
			data, err := os.ReadFile("/proc/" + strconv.Itoa(tree[i]) + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && len(tree) < maxTreeProcs {
					tree = append(tree, pid)
				}
			}
		}
	}
	return tree
}

// procPSS reads a process's Pss from smaps_rollup, in bytes.
func procPSS(pid int) (int64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, false
	}
	return statusKB(string(data), "Pss:")
}

// procRSS reads VmRSS of a process from /proc, in bytes, or 0.
func procRSS(pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	n, _ := statusKB(string(data), "VmRSS:")
	return n
}

// statusKB finds the line starting with key in a /proc file of "key: N kB"
// lines and returns N in bytes.
func statusKB(data, key string) (int64, bool) {
	for _, line := range strings.Split(data, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
