package hostchan

import (
	"context"
	"slices"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
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
	id := req.ID
	m, err := b.srv.Open(id, req.RunAs, runtime.Options{
		// As the backend's own runner does: a zygote that misses a
		// deadline or breaks the protocol takes its sandbox with it.
		Kill:        func() { go b.kill(id) },
		Timeout:     req.Limits.Timeout,
		OutputLimit: req.Limits.OutputBytes,
	})
	if err != nil {
		return nil, err
	}
	req.Mounts = append(slices.Clip(req.Mounts), m)
	diags, err := b.Sandbox.Create(ctx, req)
	if err != nil || diags.HasErrors() {
		b.srv.CloseSandbox(id)
		return diags, err
	}
	b.srv.Seal(id)
	return diags, nil
}

// kill destroys a sandbox whose zygote cannot be trusted any more; the pool
// destroys it again when the execution ends, which finds it gone.
func (b *backend) kill(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	_ = b.Sandbox.Destroy(ctx, id)
}

// killTimeout bounds the destruction of a sandbox the daemon's runner
// gave up on.
const killTimeout = time.Minute

func (b *backend) Destroy(ctx context.Context, id string) error {
	err := b.Sandbox.Destroy(ctx, id)
	b.srv.CloseSandbox(id)
	return err
}

// Exec grants the execution its token when its sandbox has a socket; the
// grant ends, and calls still in flight are cancelled, before Exec returns.
// When the zygote is controlled through the socket, the daemon runs the
// execution itself, without the backend on the way.
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
	ctl := b.srv.controlOf(req.SandboxID)
	if ctl == nil || !ctl.runner.Healthy() {
		return b.Sandbox.Exec(ctx, req, host)
	}
	ctl.busy.Store(true)
	defer ctl.busy.Store(false)
	ctl.execs.Add(1)
	res, err := ctl.runner.Exec(ctx, req, host)
	if err == nil && ctx.Err() != nil {
		// As through the plugin's stream: a caller that cancelled gets
		// its context's error (the result says the program was killed).
		err = ctx.Err()
	}
	return res, err
}

// Health answers for a zygote controlled through its socket without a round
// trip: the daemon's runner reads that connection all the time, so a zygote
// that died has closed it and the runner knows. The pool checks a sandbox
// idle for a second before reusing it, which is nearly every execution of an
// agent that thinks between its programs; on the development VM a ping made
// those 1.2 ms slower through the plugin and 0.8 ms straight over the socket
// (medians of 50 persistent executions 1.4 s apart). A zygote that is alive
// but stuck is not seen here: its next execution misses its deadline and the
// runner has the sandbox destroyed, as for one that gets stuck mid-run.
func (b *backend) Health(ctx context.Context, id string) error {
	if ctl := b.srv.controlOf(id); ctl != nil && ctl.runner.Healthy() {
		return nil
	}
	return b.Sandbox.Health(ctx, id)
}

// List adds the executions the daemon ran through the socket to what the
// backend counted, and shows their sandboxes busy while they run.
func (b *backend) List(ctx context.Context) ([]sandbox.Status, error) {
	list, err := b.Sandbox.List(ctx)
	for i := range list {
		if ctl := b.srv.controlOf(list[i].ID); ctl != nil {
			list[i].Executions += ctl.execs.Load()
			if ctl.busy.Load() && list[i].State == stateReady {
				list[i].State = stateBusy
			}
		}
	}
	return list, err
}

// Sandbox states as backends report them (sandbox.Status.State).
const (
	stateReady = "ready"
	stateBusy  = "busy"
)
