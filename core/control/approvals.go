package control

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// PendingApproval is a tool call waiting for an operator, as the
// Approvals service reports it.
type PendingApproval struct {
	ID, Tenant, Session, Server, Tool string
	// Arguments have PII as tokens.
	Arguments         json.RawMessage
	Reason            string
	Created, Deadline time.Time
}

// ErrNoSuchApproval is what an ApprovalQueue's Decide wraps for an id that
// is not pending.
var ErrNoSuchApproval = errors.New("no such pending approval")

// ApprovalQueue is the daemon's queue of calls waiting for an operator
// (every replica's, when replicas share a store).
type ApprovalQueue interface {
	Pending(ctx context.Context) ([]PendingApproval, error)
	Decide(ctx context.Context, id string, approve bool) error
}

// ApprovalServer is the Approvals service.
type ApprovalServer struct {
	cexecv1.UnimplementedApprovalsServer
	q ApprovalQueue
}

// NewApprovals returns the Approvals service over q.
func NewApprovals(q ApprovalQueue) *ApprovalServer { return &ApprovalServer{q: q} }

// Register adds the Approvals service to g.
func (s *ApprovalServer) Register(g *grpc.Server) { cexecv1.RegisterApprovalsServer(g, s) }

// ListApprovals lists the pending approvals, oldest first.
func (s *ApprovalServer) ListApprovals(ctx context.Context, _ *cexecv1.ListApprovalsRequest) (*cexecv1.ListApprovalsResponse, error) {
	pending, err := s.q.Pending(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "list approvals: %v", err)
	}
	out := &cexecv1.ListApprovalsResponse{}
	for _, p := range pending {
		a := &cexecv1.PendingApproval{Id: p.ID, Tenant: p.Tenant, Session: p.Session, Server: p.Server, Tool: p.Tool,
			ArgumentsJson: string(p.Arguments), Reason: p.Reason, Created: timestamppb.New(p.Created)}
		if !p.Deadline.IsZero() {
			a.Deadline = timestamppb.New(p.Deadline)
		}
		out.Approvals = append(out.Approvals, a)
	}
	return out, nil
}

// DecideApproval approves or denies one pending call.
func (s *ApprovalServer) DecideApproval(ctx context.Context, req *cexecv1.DecideApprovalRequest) (*cexecv1.DecideApprovalResponse, error) {
	if req.GetId() == "" {
		return nil, status.Error(codes.InvalidArgument, "id: name the pending approval (cexecctl approvals ls lists them)")
	}
	if err := s.q.Decide(ctx, req.GetId(), req.GetApprove()); err != nil {
		if errors.Is(err, ErrNoSuchApproval) {
			return nil, status.Errorf(codes.NotFound, "%v (decided already, timed out, or its execution ended; cexecctl approvals ls lists the pending ones)", err)
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &cexecv1.DecideApprovalResponse{}, nil
}
