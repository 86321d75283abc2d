package workspace

import (
	"context"
	"fmt"
	"time"
)

// Slots counts a tenant's running executions across the replicas sharing
// a data_dir (core/store's PostgreSQL).
type Slots interface {
	// AcquireSlot takes one of tenant's max slots and returns its release;
	// full reports that all max are taken (release is nil then).
	AcquireSlot(ctx context.Context, tenant string, max int) (release func(), full bool, err error)
}

// slotTimeout bounds the wait for the shared count; Acquire has no context
// of its own and must not hang an execution on a stalled database.
const slotTimeout = 10 * time.Second

// sharedSlot takes a slot in Options.Slots. The caller holds t.mu, which
// keeps this process's executions of the tenant from racing each other to
// the shared count too.
func (t *Tenant) sharedSlot(max int) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), slotTimeout)
	defer cancel()
	release, full, err := t.m.opts.Slots.AcquireSlot(ctx, t.id, max)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: count executions across replicas: %w", t.id, err)
	}
	if full {
		return nil, fmt.Errorf("tenant %s already runs %d allowed concurrent executions across replicas; retry when one finishes: %w",
			t.id, max, ErrTooManyExecutions)
	}
	return release, nil
}
