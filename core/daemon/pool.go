package daemon

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// sandboxLister is the part of the sandbox backend the pool view needs.
type sandboxLister interface {
	List(ctx context.Context) ([]sandbox.Status, error)
}

// poolView adapts the pool and its backend to the control API.
type poolView struct {
	pool    *pool.Pool
	backend string
	sandbox sandboxLister
	log     hclog.Logger
}

// poolView returns the control API's view of the pool, nil without one.
func (s *services) poolView() control.Pool {
	if s.pool == nil {
		return nil
	}
	return poolView{pool: s.pool, backend: s.cfg.Sandbox.Backend, sandbox: s.sandbox, log: s.log}
}

// PoolState merges the pool's bookkeeping with what the backend reports
// about each sandbox (memory, creation time). A backend that cannot list
// right now (restarting) leaves those zero rather than failing the call.
func (v poolView) PoolState(ctx context.Context) (control.PoolState, error) {
	st := v.pool.Stats()
	live := map[string]sandbox.Status{}
	if list, err := v.sandbox.List(ctx); err != nil {
		v.log.Debug("list sandboxes for pool status", "backend", v.backend, "error", err)
	} else {
		for _, s := range list {
			live[s.ID] = s
		}
	}
	out := control.PoolState{
		Backend:  v.backend,
		Idle:     st.Idle,
		Busy:     st.Busy,
		Creating: st.Creating,
		MaxTotal: st.MaxTotal,
		Warm:     st.Warm,
		Targets:  st.Targets,
	}
	for _, sb := range st.Sandboxes {
		b := live[sb.ID]
		out.Sandboxes = append(out.Sandboxes, control.PoolSandbox{
			ID: sb.ID, Tenant: sb.Tenant, Busy: sb.Leased, Fresh: sb.Fresh, Uses: sb.Uses, LastUsed: sb.LastUsed,
			Created: b.Created, RSSBytes: b.RSSBytes,
		})
	}
	return out, nil
}
