package hostchan

import (
	"context"
	"slices"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// Wrap returns sb with srv's direct channel in front, for a backend that
// can mount host sockets (Capabilities.HostMounts): the pool and the
// executor then use it as they would the backend. Its Create gives the
// sandbox a socket, Destroy closes it, and Exec grants the execution a
// token for the length of the call.
func Wrap(srv *Server, sb sandbox.Sandbox) sandbox.Sandbox {
	return &backend{Sandbox: sb, srv: srv}
}

// backend is a sandbox backend whose sandboxes have a host call socket.
type backend struct {
	sandbox.Sandbox
	srv *Server
}

func (b *backend) Create(ctx context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	m, err := b.srv.Open(req.ID, req.RunAs)
	if err != nil {
		return nil, err
	}
	req.Mounts = append(slices.Clip(req.Mounts), m)
	diags, err := b.Sandbox.Create(ctx, req)
	if err != nil || diags.HasErrors() {
		b.srv.CloseSandbox(req.ID)
	}
	return diags, err
}

func (b *backend) Destroy(ctx context.Context, id string) error {
	err := b.Sandbox.Destroy(ctx, id)
	b.srv.CloseSandbox(id)
	return err
}

// Exec grants the execution its token when its sandbox has a socket; the
// grant ends, and calls still in flight are cancelled, before Exec returns.
func (b *backend) Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	if !b.srv.Has(req.SandboxID) {
		return b.Sandbox.Exec(ctx, req, host)
	}
	token, revoke, err := b.srv.Grant(ctx, req.SandboxID, host)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer revoke()
	req.HostToken = token
	return b.Sandbox.Exec(ctx, req, host)
}
