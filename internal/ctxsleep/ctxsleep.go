// Package ctxsleep waits for a while or until a context ends, whichever
// comes first: the one wait that backoffs, retries and paced benchmarks
// share.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, when it returns ctx's error. A d of
// zero or less waits for nothing but still reports an ended ctx.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
