package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/pipeline"
	"github.com/cexec/cexec/core/store"
)

// approvalQueue is the pipeline's queue of calls waiting for an operator,
// as the control API's Approvals service wants it.
type approvalQueue struct{ q *pipeline.Approvals }

func (a approvalQueue) Pending(ctx context.Context) ([]control.PendingApproval, error) {
	list, err := a.q.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []control.PendingApproval
	for _, p := range list {
		out = append(out, control.PendingApproval{ID: p.ID, Tenant: p.Tenant, Session: p.Session, Server: p.Server,
			Tool: p.Tool, Arguments: p.Arguments, Reason: p.Reason, Created: p.Created, Deadline: p.Deadline})
	}
	return out, nil
}

func (a approvalQueue) Decide(ctx context.Context, id string, approve bool) error {
	err := a.q.Decide(ctx, id, approve)
	if errors.Is(err, pipeline.ErrNoSuchApproval) {
		return fmt.Errorf("%w: %q", control.ErrNoSuchApproval, id)
	}
	return err
}

// sharedApprovals puts the approval queue in the postgres store replicas
// share, so that `cexecctl approvals` on any replica lists and decides the
// calls waiting in all of them.
type sharedApprovals struct{ p *store.Postgres }

func (s sharedApprovals) AddApproval(ctx context.Context, a pipeline.PendingApproval) error {
	return s.p.AddApproval(ctx, store.Approval{ID: a.ID, Tenant: a.Tenant, Session: a.Session, Server: a.Server, Tool: a.Tool,
		Arguments: a.Arguments, Reason: a.Reason, Created: a.Created, Deadline: a.Deadline})
}

func (s sharedApprovals) RemoveApproval(ctx context.Context, id string) error {
	return s.p.RemoveApproval(ctx, id)
}

func (s sharedApprovals) PendingApprovals(ctx context.Context) ([]pipeline.PendingApproval, error) {
	list, err := s.p.PendingApprovals(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]pipeline.PendingApproval, 0, len(list))
	for _, a := range list {
		out = append(out, pipeline.PendingApproval{ID: a.ID, Tenant: a.Tenant, Session: a.Session, Server: a.Server,
			Tool: a.Tool, Arguments: a.Arguments, Reason: a.Reason, Created: a.Created, Deadline: a.Deadline})
	}
	return out, nil
}

func (s sharedApprovals) DecideApproval(ctx context.Context, id string, approve bool) (bool, error) {
	return s.p.DecideApproval(ctx, id, approve)
}

func (s sharedApprovals) ApprovalDecision(ctx context.Context, id string) (bool, bool, error) {
	return s.p.ApprovalDecision(ctx, id)
}

// shareApprovals returns an approval queue kept in the store, and delivers
// to it the decisions other replicas take on this replica's calls.
func shareApprovals(p *store.Postgres, log hclog.Logger) *pipeline.Approvals {
	q := pipeline.NewSharedApprovals(sharedApprovals{p}, log)
	p.Subscribe(store.TopicApproval, func(payload string) {
		if id, approve, ok := store.ParseApprovalVerdict(payload); ok {
			q.Deliver(id, approve)
		}
	})
	return q
}
