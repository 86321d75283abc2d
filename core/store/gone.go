package store

import (
	"context"
	"fmt"
)

// OnReplicaGone calls fn with the id of every other replica that was alive
// at one heartbeat of this one and is not at a later one: it stopped, was
// killed, or lost the database. What it ran and no longer holds (workflow
// runs) can be taken over here. fn runs on the heartbeat goroutine and must
// not block.
func (p *Postgres) OnReplicaGone(fn func(replica string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.goneHooks = append(p.goneHooks, fn)
}

// checkGone compares the replicas alive now with those alive at the last
// check (the first is made by Open) and tells the hooks of the ones that
// went.
func (p *Postgres) checkGone(ctx context.Context) error {
	rows, err := p.pool.Query(ctx, `SELECT r.id FROM cexec_replicas r WHERE `+liveSQL("$1"), p.liveWindow().Seconds())
	if err != nil {
		return fmt.Errorf("store: list live replicas: %w", unreachable(err))
	}
	live := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("store: list live replicas: %w", err)
		}
		live[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: list live replicas: %w", unreachable(err))
	}
	var gone []string
	p.mu.Lock()
	for id := range p.alive {
		if !live[id] && id != p.replica {
			gone = append(gone, id)
		}
	}
	p.alive = live
	hooks := p.goneHooks
	p.mu.Unlock()
	for _, id := range gone {
		p.log.Info("replica gone", "replica", id)
		for _, fn := range hooks {
			fn(id)
		}
	}
	return nil
}
