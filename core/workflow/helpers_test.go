package workflow

import "runtime"

// waitAMoment lets other goroutines run while a test polls for a state.
func waitAMoment() { runtime.Gosched() }
