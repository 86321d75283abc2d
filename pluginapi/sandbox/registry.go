package sandbox

import (
	"fmt"
	"sync"

	"github.com/cexec/cexec/pluginapi"
)

// Registry is a backend's bookkeeping of its live sandboxes by id: Create
// reserves the id before the slow start so that a second Create with it
// fails at once, Exec and Health look sandboxes up, Destroy removes them,
// List walks them, and Close takes them all while refusing new ones. B is
// the backend's own sandbox type. The errors it returns are the ones the
// Sandbox interface documents (pluginapi.ErrInvalidArgument for an id in
// use, ErrNotFound, ErrPluginShutdown), worded for the operation.
//
// A Create goes: Reserve; start the sandbox; then Commit it, or Release the
// id when it did not start. When Commit reports that the registry closed
// meanwhile, the caller destroys the sandbox and then Releases the id, so
// that Wait covers that clean-up too.
type Registry[B any] struct {
	mu       sync.Mutex
	slots    map[string]*slot[B]
	closed   bool
	inflight sync.WaitGroup
}

type slot[B any] struct {
	box   B
	ready bool // false while reserved
}

// Reserve claims id for a sandbox about to be created.
func (r *Registry[B]) Reserve(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("create sandbox %s: %w", id, pluginapi.ErrPluginShutdown)
	}
	if _, dup := r.slots[id]; dup {
		return fmt.Errorf("create sandbox %s: %w: the id is in use", id, pluginapi.ErrInvalidArgument)
	}
	if r.slots == nil {
		r.slots = map[string]*slot[B]{}
	}
	r.slots[id] = &slot[B]{}
	r.inflight.Add(1)
	return nil
}

// Commit makes the reserved id's sandbox b visible. It returns false, and
// keeps the id reserved, when the registry closed since Reserve: b was
// never seen by Close, so the caller destroys it and then calls Release.
func (r *Registry[B]) Commit(id string, b B) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.slots[id] = &slot[B]{box: b, ready: true}
	r.inflight.Done()
	return true
}

// Release gives up a reservation whose sandbox did not start, or was
// destroyed after Commit returned false.
func (r *Registry[B]) Release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.slots[id]; ok && !s.ready {
		delete(r.slots, id)
	}
	r.inflight.Done()
}

// Get returns the sandbox with the id; a reserved id is not found yet.
func (r *Registry[B]) Get(id string) (B, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.slots[id]; s != nil && s.ready {
		return s.box, nil
	}
	var zero B
	return zero, fmt.Errorf("sandbox %q: %w", id, pluginapi.ErrNotFound)
}

// Remove takes the sandbox with the id out of the registry for Destroy.
func (r *Registry[B]) Remove(id string) (B, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.slots[id]; s != nil && s.ready {
		delete(r.slots, id)
		return s.box, nil
	}
	var zero B
	return zero, fmt.Errorf("destroy sandbox %q: %w", id, pluginapi.ErrNotFound)
}

// Entry is one live sandbox and its id.
type Entry[B any] struct {
	ID  string
	Box B
}

// All returns the live sandboxes, in no particular order.
func (r *Registry[B]) All() []Entry[B] {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Entry[B], 0, len(r.slots))
	for id, s := range r.slots {
		if s.ready {
			out = append(out, Entry[B]{ID: id, Box: s.box})
		}
	}
	return out
}

// Len counts the ids in use, reserved ones included.
func (r *Registry[B]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.slots)
}

// Close refuses new reservations and commits from now on, and takes and
// returns the live sandboxes for the caller to destroy.
func (r *Registry[B]) Close() []B {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	out := make([]B, 0, len(r.slots))
	for id, s := range r.slots {
		if s.ready {
			out = append(out, s.box)
			delete(r.slots, id)
		}
	}
	return out
}

// Wait waits until every reservation has been committed or released: after
// Close, until the creations in flight have cleaned up after themselves.
func (r *Registry[B]) Wait() {
	r.inflight.Wait()
}
