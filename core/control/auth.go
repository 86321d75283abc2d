package control

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/auth"
	"github.com/cexec/cexec/core/config"
)

// Signer is the view of the OAuth sign-in manager (core/auth.Manager) the
// Auth service needs.
type Signer interface {
	Resolve(server, tenant string) (*config.MCPServer, auth.Key, error)
	Login(ctx context.Context, s *config.MCPServer, key auth.Key, show func(authURL string)) error
	List() ([]*auth.Record, error)
	Logout(key auth.Key) error
}

// AuthServer serves the Auth service: sign-ins to OAuth-protected upstream
// servers. No call returns a token.
type AuthServer struct {
	cexecv1.UnimplementedAuthServer
	signer Signer
}

// NewAuth returns the Auth service over signer.
func NewAuth(signer Signer) *AuthServer { return &AuthServer{signer: signer} }

// Register adds the service to g.
func (a *AuthServer) Register(g *grpc.Server) { cexecv1.RegisterAuthServer(g, a) }

// Login runs one sign-in; the stream's context bounds it.
func (a *AuthServer) Login(req *cexecv1.LoginRequest, stream grpc.ServerStreamingServer[cexecv1.LoginEvent]) error {
	s, key, err := a.signer.Resolve(req.GetServer(), req.GetTenant())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	var sendErr error
	err = a.signer.Login(stream.Context(), s, key, func(u string) {
		sendErr = stream.Send(&cexecv1.LoginEvent{Event: &cexecv1.LoginEvent_AuthorizationUrl{AuthorizationUrl: u}})
	})
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return stream.Send(&cexecv1.LoginEvent{Event: &cexecv1.LoginEvent_Done{Done: &cexecv1.LoginDone{Server: key.Server, Tenant: key.Tenant}}})
}

// ListLogins lists the kept sign-ins without their tokens.
func (a *AuthServer) ListLogins(context.Context, *cexecv1.ListLoginsRequest) (*cexecv1.ListLoginsResponse, error) {
	recs, err := a.signer.List()
	if err != nil && len(recs) == 0 {
		return nil, status.Error(codes.Internal, err.Error())
	}
	out := &cexecv1.ListLoginsResponse{}
	for _, r := range recs {
		li := &cexecv1.LoginInfo{Server: r.Server, Tenant: r.Tenant, Issuer: r.Issuer, Scope: r.Token.Scope,
			Refreshable: r.Token.RefreshToken != "", Updated: timestamppb.New(r.Updated)}
		if !r.Token.ExpiresAt.IsZero() {
			li.Expires = timestamppb.New(r.Token.ExpiresAt)
		}
		out.Logins = append(out.Logins, li)
	}
	return out, nil
}

// Logout forgets a tenant's token for a server.
func (a *AuthServer) Logout(_ context.Context, req *cexecv1.LogoutRequest) (*cexecv1.LogoutResponse, error) {
	_, key, err := a.signer.Resolve(req.GetServer(), req.GetTenant())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := a.signer.Logout(key); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &cexecv1.LogoutResponse{}, nil
}
