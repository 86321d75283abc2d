//go:build !linux

package exec

import "io"

// isTerminal is false where cexecctl does not know how to tell: --ask
// still asks.
func isTerminal(io.Reader) bool { return false }
