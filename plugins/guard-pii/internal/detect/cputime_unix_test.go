//go:build unix

package detect_test

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time the process has used, so
// benchmarks can report CPU per operation next to wall time: on a shared
// machine the wall time also counts waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
