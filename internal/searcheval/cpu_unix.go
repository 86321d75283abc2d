//go:build unix

package searcheval

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used: on
// a shared machine it shows the work done when wall time shows the wait.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
