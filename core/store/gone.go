package store

import (
	"context"
	"fmt"
)

// OnReplicaGone calls fn with the id of every other replica that was alive
// at one heartbeat of this one and is not at a later one: it stopped, was
// killed, or lost the database; and again for one that was no longer alive
// but held connections, when they close (it hung, then was killed). What
// it ran and no longer holds (workflow runs) can be taken over here. fn
// runs on the heartbeat goroutine and must not block.
func (p *Postgres) OnReplicaGone(fn func(replica string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.goneHooks = append(p.goneHooks, fn)
}

// checkGone compares the replicas alive now with those alive at the last
// check (the first is made by Open) and tells the hooks of the ones that
// went. A replica that is not alive but still holds connections (hung:
// SIGSTOP, a long pause, cut off from the database only) is told of when
// it stops being alive and again when its connections close: at the first
// it may still hold its runs (flocks), which it lets go only when its
// process ends.
func (p *Postgres) checkGone(ctx context.Context) error {
	rows, err := p.pool.Query(ctx, `SELECT r.id, `+liveSQL("$1")+`,
		EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = '`+appPrefix+`' || r.id)
		FROM cexec_replicas r`, p.liveWindow().Seconds())
	if err != nil {
		return fmt.Errorf("store: list live replicas: %w", unreachable(err))
	}
	live, connected := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var id string
		var isLive, isConnected bool
		if err := rows.Scan(&id, &isLive, &isConnected); err != nil {
			rows.Close()
			return fmt.Errorf("store: list live replicas: %w", err)
		}
		if isLive {
			live[id] = true
		}
		if isConnected {
			connected[id] = true
		}
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
	for id := range p.connected {
		if !p.alive[id] && !live[id] && !connected[id] && id != p.replica {
			gone = append(gone, id)
		}
	}
	p.alive, p.connected = live, connected
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
