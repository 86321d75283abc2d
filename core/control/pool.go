package control

import (
	"cmp"
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/pluginapi"
)

// Pool is the warm sandbox pool as the server reports it.
type Pool interface {
	// PoolState is a snapshot of the pool, with what the backend reports
	// about each sandbox.
	PoolState(ctx context.Context) (PoolState, error)
}

// PoolState is a snapshot of the sandbox pool.
type PoolState struct {
	// Backend names the sandbox plugin.
	Backend string
	// Idle counts warm sandboxes per tenant.
	Idle     map[string]int
	Busy     int
	Creating int
	MaxTotal int
	// Warm is the configured number of idle sandboxes per active tenant.
	Warm int
	// Targets is how many sandboxes the pool keeps for each active tenant.
	Targets   map[string]int
	Sandboxes []PoolSandbox
}

// PoolSandbox is one sandbox of the pool.
type PoolSandbox struct {
	ID     string
	Tenant string
	Busy   bool
	// Fresh sandboxes serve one execution and are destroyed after it.
	Fresh    bool
	Uses     int
	LastUsed time.Time
	// Created and RSSBytes come from the backend; zero when it does not
	// report them.
	Created  time.Time
	RSSBytes int64
}

// PoolStatus reports the warm sandbox pool: idle sandboxes per tenant, busy
// ones, creations in flight, the limits and every sandbox's memory.
func (s *Server) PoolStatus(ctx context.Context, _ *cexecv1.PoolStatusRequest) (*cexecv1.PoolStatusResponse, error) {
	if s.d.Pool == nil {
		return nil, status.Error(codes.FailedPrecondition, "pool status: no sandbox backend is running (see `cexecctl plugins ls`)")
	}
	st, err := s.d.Pool.PoolState(ctx)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &cexecv1.PoolStatusResponse{
		Idle:     map[string]int32{},
		Busy:     int32(st.Busy),
		Creating: int32(st.Creating),
		MaxTotal: int32(st.MaxTotal),
		Backend:  st.Backend,
		Warm:     int32(st.Warm),
		Targets:  map[string]int32{},
	}
	for t, n := range st.Idle {
		out.Idle[t] = int32(n)
	}
	for t, n := range st.Targets {
		out.Targets[t] = int32(n)
	}
	sbs := slices.Clone(st.Sandboxes)
	slices.SortFunc(sbs, func(a, b PoolSandbox) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ID, b.ID))
	})
	for _, sb := range sbs {
		ps := &cexecv1.PoolSandbox{
			Id:       sb.ID,
			Tenant:   sb.Tenant,
			State:    "idle",
			Fresh:    sb.Fresh,
			Uses:     int32(sb.Uses),
			RssBytes: sb.RSSBytes,
		}
		if sb.Busy {
			ps.State = "busy"
		}
		if !sb.LastUsed.IsZero() {
			ps.LastUsedUnixMs = sb.LastUsed.UnixMilli()
		}
		if !sb.Created.IsZero() {
			ps.CreatedUnixMs = sb.Created.UnixMilli()
		}
		out.Sandboxes = append(out.Sandboxes, ps)
	}
	return out, nil
}
