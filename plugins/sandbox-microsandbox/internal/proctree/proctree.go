// Package proctree finds and kills the processes below a process, from
// /proc, for the microsandbox plugin's fakes: with no VM around their
// guests, ending a sandbox means ending every process its commands left.
package proctree

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Descendants lists the processes below pid.
func Descendants(pid int) []int {
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
		// The parent follows the state, after the command name, which
		// may contain spaces and parentheses.
		s := string(data)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
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

// KillDescendants sends SIGKILL to every process below pid.
func KillDescendants(pid int) {
	for _, c := range Descendants(pid) {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
}
