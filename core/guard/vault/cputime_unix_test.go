//go:build unix

package vault_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used:
// on a shared machine wall time also counts waiting for a core, so the
// benchmarks report CPU per operation next to it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
