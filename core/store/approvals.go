package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// TopicApproval is the notification of an operator's decision on a call
// that waits in another replica; its payload is "1:<id>" (approved) or
// "0:<id>" (denied).
const TopicApproval = "approval"

// Approval is a tool call waiting for an operator, as replicas share it:
// any replica's `cexecctl approvals` lists and decides it, and the replica
// whose execution waits (Replica) hears the decision.
type Approval struct {
	ID, Tenant, Session, Server, Tool string
	// Arguments have PII as tokens.
	Arguments json.RawMessage
	Reason    string
	Created   time.Time
	// Deadline is zero when the wait has none.
	Deadline time.Time
	Replica  string
}

// AddApproval records a call of this replica's that waits for an operator.
func (p *Postgres) AddApproval(ctx context.Context, a Approval) error {
	var deadline *time.Time
	if !a.Deadline.IsZero() {
		deadline = &a.Deadline
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO cexec_approvals
		(id, replica, tenant, session, server, tool, arguments, reason, created, deadline)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		a.ID, p.replica, a.Tenant, a.Session, a.Server, a.Tool, string(a.Arguments), a.Reason, a.Created, deadline)
	if err != nil {
		return fmt.Errorf("store: add approval %s: %w", a.ID, unreachable(err))
	}
	return nil
}

// RemoveApproval drops a call of this replica's that no longer waits
// (decided, timed out, or its execution ended). When the database cannot
// be reached the error says so and the heartbeat drops it once it can.
func (p *Postgres) RemoveApproval(ctx context.Context, id string) error {
	const del = `DELETE FROM cexec_approvals WHERE id = $1 AND replica = $2`
	if _, err := p.pool.Exec(ctx, del, id, p.replica); err != nil {
		p.deleteLater("waiting call "+id, del, id, p.replica)
		return fmt.Errorf("store: remove approval %s (retried with the heartbeat): %w", id, unreachable(err))
	}
	return nil
}

// PendingApprovals lists the undecided calls of live replicas, oldest
// first: a dead replica's calls died with it.
func (p *Postgres) PendingApprovals(ctx context.Context) ([]Approval, error) {
	rows, err := p.pool.Query(ctx, `SELECT a.id, a.replica, a.tenant, a.session, a.server, a.tool, a.arguments,
		a.reason, a.created, a.deadline
		FROM cexec_approvals a JOIN cexec_replicas r ON r.id = a.replica
		WHERE a.decision IS NULL AND `+liveSQL("$1")+` ORDER BY a.created, a.id`, p.liveWindow().Seconds())
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", unreachable(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Approval, error) {
		var a Approval
		var args string
		var deadline *time.Time
		err := row.Scan(&a.ID, &a.Replica, &a.Tenant, &a.Session, &a.Server, &a.Tool, &args, &a.Reason, &a.Created, &deadline)
		a.Arguments = json.RawMessage(args)
		if deadline != nil {
			a.Deadline = *deadline
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", unreachable(err))
	}
	return out, nil
}

// DecideApproval records an operator's decision on a pending call of any
// live replica and notifies the others (the call's replica, when it is
// another, hears it there); found is false when no live replica's call by
// that id is pending.
func (p *Postgres) DecideApproval(ctx context.Context, id string, approve bool) (found bool, err error) {
	var replica string
	err = p.pool.QueryRow(ctx, `UPDATE cexec_approvals a SET decision = $2 FROM cexec_replicas r
		WHERE a.id = $1 AND a.decision IS NULL AND r.id = a.replica AND `+liveSQL("$3")+` RETURNING a.replica`,
		id, approve, p.liveWindow().Seconds()).Scan(&replica)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: decide approval %s: %w", id, unreachable(err))
	}
	verdict := "0:"
	if approve {
		verdict = "1:"
	}
	// The waiting replica also reads the decision back (ApprovalDecision)
	// when a notification is lost.
	p.notifyQuiet(ctx, TopicApproval, verdict+id)
	return true, nil
}

// ApprovalDecision reads what an operator decided on a call of this
// replica's: decided is false while it is pending.
func (p *Postgres) ApprovalDecision(ctx context.Context, id string) (decided, approve bool, err error) {
	var d *bool
	err = p.pool.QueryRow(ctx, `SELECT decision FROM cexec_approvals WHERE id = $1 AND replica = $2`, id, p.replica).Scan(&d)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("store: read approval %s: %w", id, unreachable(err))
	}
	if d == nil {
		return false, false, nil
	}
	return true, *d, nil
}

// ParseApprovalVerdict splits a TopicApproval payload.
func ParseApprovalVerdict(payload string) (id string, approve, ok bool) {
	v, id, found := strings.Cut(payload, ":")
	if !found || id == "" || (v != "0" && v != "1") {
		return "", false, false
	}
	return id, v == "1", true
}
