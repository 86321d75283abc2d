package daemon

import (
	"context"

	"github.com/cexec/cexec/core/auth"
)

// signIn is the auth manager as the pipeline's SignIn: a sign-in link
// offered to an execution's user (pipeline/signin.go) runs the same flow
// as `cexecctl auth login`, redirect listener and token store in cexecd.
type signIn struct{ m *auth.Manager }

func (s signIn) Login(ctx context.Context, tenant, server string, show func(authURL string)) error {
	srv, key, err := s.m.Resolve(server, tenant)
	if err != nil {
		return err
	}
	return s.m.Login(ctx, srv, key, show)
}
