// Package maxprocs chooses how many CPUs the Go processes on an execution's
// path (cexecd, cexecctl, sandbox plugins) run Go code on.
package maxprocs

import (
	"os"
	"runtime"
)

// Set gives the process half of the CPUs Go would use (at least one),
// unless the GOMAXPROCS environment variable has chosen already; it returns
// the number in effect.
//
// An execution crosses these processes as a chain of short steps, each
// making a goroutine ready. While a P is idle, the scheduler wakes another
// thread for every such goroutine, and on this path the wake-ups cost more
// than the work: on 2 CPUs, one P each cut the CPU time of a warm
// execution by a third (cexecd 1.25 -> 0.65-0.85 ms, sandbox plugin
// 0.875 -> 0.55, client 0.5 -> 0.3) and its p50 latency by about 0.8 ms,
// with no loss of throughput at concurrency 8. The other half of the
// machine runs the sandboxes, which do most of the work.
func Set() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	n := max(1, runtime.GOMAXPROCS(0)/2)
	runtime.GOMAXPROCS(n)
	return n
}
