package daemon

import (
	"errors"
	"fmt"

	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/pipeline"
)

// approvalQueue is the pipeline's queue of calls waiting for an operator,
// as the control API's Approvals service wants it.
type approvalQueue struct{ q *pipeline.Approvals }

func (a approvalQueue) Pending() []control.PendingApproval {
	var out []control.PendingApproval
	for _, p := range a.q.List() {
		out = append(out, control.PendingApproval{ID: p.ID, Tenant: p.Tenant, Session: p.Session, Server: p.Server,
			Tool: p.Tool, Arguments: p.Arguments, Reason: p.Reason, Created: p.Created, Deadline: p.Deadline})
	}
	return out
}

func (a approvalQueue) Decide(id string, approve bool) error {
	err := a.q.Decide(id, approve)
	if errors.Is(err, pipeline.ErrNoSuchApproval) {
		return fmt.Errorf("%w: %q", control.ErrNoSuchApproval, id)
	}
	return err
}
