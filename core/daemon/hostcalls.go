package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/cexec/cexec/core/hostchan"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// directHostCalls puts the direct host call channel (core/hostchan) in
// front of sb when the backend can mount its sockets; otherwise host calls
// keep going through the backend's Exec stream.
func (s *services) directHostCalls(sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caps, err := sb.Capabilities(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox backend %s: capabilities: %w", s.cfg.Sandbox.Backend, err)
	}
	if !caps.HostMounts {
		return sb, nil
	}
	srv, err := hostchan.New("", s.log.Named("hostcalls"))
	if err != nil {
		return nil, err
	}
	s.hostCalls = srv
	return hostchan.Wrap(srv, sb), nil
}

// closeHostCalls removes the sockets, after the pool destroyed the
// sandboxes.
func (s *services) closeHostCalls() {
	if s.hostCalls == nil {
		return
	}
	if err := s.hostCalls.Close(); err != nil {
		s.log.Warn("remove host call sockets", "dir", s.hostCalls.Dir(), "error", err)
	}
}
