package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cexec/cexec/plugins/sandbox-microsandbox/internal/proctree"
)

// setSubreaper makes this process PR_SET_CHILD_SUBREAPER.
func setSubreaper() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// killExecs kills everything the sandbox's exec sessions started, as the
// VM's end does; the sessions then end as msb exec does when its VM goes.
func killExecs(r *record) {
	for _, pid := range r.Execs {
		proctree.KillDescendants(pid)
	}
	r.Execs = nil
}

// rss sums VmRSS over pids, in bytes.
func rss(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				if fs := strings.Fields(v); len(fs) > 0 {
					kb, _ := strconv.ParseInt(fs[0], 10, 64)
					total += kb << 10
				}
			}
		}
	}
	return total
}
