package bridge

import (
	"context"
	"sync"

	"github.com/cexec/cexec/core/catalog"
)

// Called is the tool call in progress, as ExecOptions.Before sees it
// through CalledFrom: the tool found in the catalog (its annotations
// decide approvals; zero for read_resource, which has no catalog entry),
// and a note on its approval for the call's record.
type Called struct {
	Tool catalog.Tool

	mu       sync.Mutex
	approval string
}

type calledKey struct{}

// WithCalled returns ctx for the call c, as the bridge passes it to
// ExecOptions.Before (for tests of such hooks).
func WithCalled(ctx context.Context, c *Called) context.Context {
	return context.WithValue(ctx, calledKey{}, c)
}

// CalledFrom returns the call in progress that ctx was made for, or nil.
func CalledFrom(ctx context.Context) *Called {
	c, _ := ctx.Value(calledKey{}).(*Called)
	return c
}

// SetApproval records how the call was approved or denied ("approved by
// the user", "denied by an operator", "timed out"); it goes into the call's
// CallRecord and the session log.
func (c *Called) SetApproval(note string) {
	c.mu.Lock()
	c.approval = note
	c.mu.Unlock()
}

func (c *Called) note() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.approval
}
