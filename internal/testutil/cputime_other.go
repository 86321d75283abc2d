//go:build !unix

package testutil

import "time"

// ProcessCPU is 0 where getrusage is missing: benchmarks then report no CPU
// figure.
func ProcessCPU() time.Duration { return 0 }
