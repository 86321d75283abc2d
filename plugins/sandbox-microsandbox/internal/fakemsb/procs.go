package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// setSubreaper makes this process PR_SET_CHILD_SUBREAPER.
func setSubreaper() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// killTree kills every descendant of pid.
func killTree(pid int) {
	for _, c := range descendants(pid) {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 {
			pp, _ := strconv.Atoi(fields[1])
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// killExecs kills everything the sandbox's exec sessions started, as the
// VM's end does; the sessions then end as msb exec does when its VM goes.
func killExecs(r *record) {
	for _, pid := range r.Execs {
		killTree(pid)
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
