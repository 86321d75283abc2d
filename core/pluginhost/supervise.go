package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/ctxsleep"
	"github.com/cexec/cexec/pluginapi"
)

// supervised is one configured plugin across all of its processes.
type supervised struct {
	host *Host
	cfg  *config.Plugin
	kind pluginapi.Kind
	id   string // "kind.name"
	log  hclog.Logger

	mu       sync.Mutex
	state    State
	inst     *instance // set while state is StateOK
	changed  chan struct{}
	version  string
	apiVer   string
	restarts int
	lastErr  string
	// lastExit describes how the last process ended, for LastError
	// once the plugin runs again.
	lastExit string
	backoff  time.Duration
}

func newSupervised(h *Host, p *config.Plugin) *supervised {
	kind := p.Kind
	id := key(kind, p.Name)
	return &supervised{
		host:    h,
		cfg:     p,
		kind:    kind,
		id:      id,
		log:     h.log.Named(id),
		state:   StateStarting,
		changed: make(chan struct{}),
		backoff: backoffMin,
	}
}

// setLocked changes state and wakes callers waiting for a change. s.mu held.
func (s *supervised) setLocked(st State) {
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *supervised) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Kind:       s.kind,
		Name:       s.cfg.Name,
		Version:    s.version,
		APIVersion: s.apiVer,
		State:      s.state,
		Restarts:   s.restarts,
		LastError:  s.lastErr,
		Required:   s.cfg.Required,
	}
	if s.inst != nil {
		st.PID = s.inst.pid
	}
	return st
}

// start performs the first launch. Failures of optional plugins are turned
// into warnings. A binary that config.Load already found unusable is checked
// again but, since Load reported it, only reported again when the plugin is
// required and repeatLoadErrors is set (Start must not succeed without it).
func (s *supervised) start(ctx context.Context, repeatLoadErrors bool) hcl.Diagnostics {
	if s.cfg.ResolvedCommand() == "" {
		if _, diags := s.cfg.CheckBinary(); diags.HasErrors() {
			s.mu.Lock()
			s.lastErr = diagsError(diags)
			s.setLocked(StateFailed)
			s.mu.Unlock()
			if s.cfg.Required && repeatLoadErrors {
				return diags
			}
			return nil
		}
	}
	inst, diags := launch(ctx, s.host.cfg, s.cfg, s.log)
	if diags.HasErrors() {
		s.mu.Lock()
		s.lastErr = diagsError(diags)
		s.setLocked(StateFailed)
		s.mu.Unlock()
		if s.cfg.Required {
			return diags
		}
		s.log.Warn("optional plugin failed to start; continuing without it", "error", diagsError(diags))
		return demote(diags, s.id)
	}
	if !s.adopt(inst, false) {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Plugin host stopped during startup",
			Detail:   fmt.Sprintf("start plugin %s: %v", s.id, errHostStopped),
			Subject:  s.cfg.DeclRange.Ptr(),
		})
	}
	return diags
}

// adopt makes inst the current process and starts watching it. It returns
// false, after killing inst, when the host is stopping.
func (s *supervised) adopt(inst *instance, restarted bool) bool {
	// Holding the host's lock orders this against killAll: either the
	// host is already stopping, or killAll will find inst in s.inst.
	s.host.mu.Lock()
	if s.host.ctx.Err() != nil {
		s.host.mu.Unlock()
		inst.client.Kill()
		return false
	}
	s.host.wg.Add(1)
	s.mu.Lock()
	s.inst = inst
	s.version = inst.info.Version
	s.apiVer = inst.apiVersion
	s.lastErr = ""
	if restarted {
		s.restarts++
		// The cause of the last restart stays visible in plugins ls.
		s.lastErr = s.lastExit + "; restarted"
	}
	s.setLocked(StateOK)
	s.mu.Unlock()
	s.host.mu.Unlock()
	s.log.Info("plugin running", "version", inst.info.Version, "api", inst.apiVersion, "pid", inst.pid)

	go func() {
		defer s.host.wg.Done()
		s.supervise(inst)
	}()
	return true
}

// disable detaches the current process for Stop and returns it.
func (s *supervised) disable() *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.inst
	s.inst = nil
	if s.state != StateFailed {
		s.lastErr = errHostStopped.Error()
		s.setLocked(StateDisabled)
	}
	return inst
}

// supervise waits for inst to exit and, unless the host is stopping,
// relaunches the plugin with exponential backoff until it runs again.
func (s *supervised) supervise(inst *instance) {
	waitExit(s.host.ctx, inst)
	close(inst.exited)
	if s.host.ctx.Err() != nil {
		return
	}
	exitAt := time.Now()
	ran := exitAt.Sub(inst.started)

	s.mu.Lock()
	if s.inst != inst {
		s.mu.Unlock()
		return
	}
	s.inst = nil
	s.lastErr = fmt.Sprintf("process %d exited after %s%s at %s", inst.pid, ran.Round(time.Millisecond), exitHow(inst), exitAt.Format(time.DateTime))
	s.lastExit = s.lastErr
	s.setLocked(StateRestarting)
	if ran >= stablePeriod {
		s.backoff = backoffMin
	}
	s.mu.Unlock()
	s.log.Error("plugin process exited; restarting", "pid", inst.pid, "ran", ran.Round(time.Millisecond))
	// Reap go-plugin's goroutines and socket for the dead process.
	inst.client.Kill()

	for {
		s.mu.Lock()
		delay := s.backoff
		s.backoff = min(2*s.backoff, backoffMax)
		s.mu.Unlock()

		if ctxsleep.Sleep(s.host.ctx, delay) != nil {
			return
		}

		next, diags := launch(s.host.ctx, s.host.cfg, s.cfg, s.log)
		if diags.HasErrors() {
			s.mu.Lock()
			s.lastErr = diagsError(diags)
			s.mu.Unlock()
			s.log.Error("plugin restart failed", "error", diagsError(diags), "retry_in", min(2*delay, backoffMax))
			continue
		}
		if !s.adopt(next, true) {
			return
		}
		s.log.Info("plugin restarted", "down_for", time.Since(exitAt).Round(time.Millisecond))
		for _, fn := range s.host.restartHooks() {
			fn(s.kind, s.cfg.Name)
		}
		return
	}
}

// exitHow is " (signal: killed)", " (exit status 2)" and the like for an
// exited instance, or "" when that is unknown. go-plugin sets Exited only
// after reaping the process, so ProcessState is final by then.
func exitHow(inst *instance) string {
	if inst.cmd == nil || !inst.client.Exited() || inst.cmd.ProcessState == nil {
		return ""
	}
	return " (" + inst.cmd.ProcessState.String() + ")"
}

// waitExit returns once inst's process has exited or ctx ends. go-plugin only
// exposes exit through Client.Exited, so it follows the gRPC connection's
// state: the connection breaks the moment the process dies, and a slow tick
// covers a connection that went idle.
func waitExit(ctx context.Context, inst *instance) {
	const (
		slowTick  = 2 * time.Second
		fastTick  = 5 * time.Millisecond
		fastLimit = time.Second
	)
	state := inst.conn.GetState()
	for !inst.client.Exited() {
		wctx, cancel := context.WithTimeout(ctx, slowTick)
		changed := inst.conn.WaitForStateChange(wctx, state)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if !changed {
			continue
		}
		state = inst.conn.GetState()
		if state == connectivity.Ready || state == connectivity.Connecting {
			continue
		}
		// The connection broke; go-plugin marks the exit right after
		// reaping the process.
		for deadline := time.Now().Add(fastLimit); time.Now().Before(deadline) && !inst.client.Exited(); {
			time.Sleep(fastTick)
		}
	}
}

// acquire returns the running process, waiting (bounded by ctx and
// restartWait) while the plugin starts or restarts.
func (s *supervised) acquire(ctx context.Context) (*instance, error) {
	var limit *time.Timer
	defer func() {
		if limit != nil {
			limit.Stop()
		}
	}()
	for {
		s.mu.Lock()
		st, inst, changed, lastErr := s.state, s.inst, s.changed, s.lastErr
		s.mu.Unlock()
		switch st {
		case StateOK:
			return inst, nil
		case StateFailed, StateDisabled:
			return nil, fmt.Errorf("plugin %s is %s (%s): %w", s.id, st, lastErr, pluginapi.ErrPluginShutdown)
		}
		if limit == nil {
			limit = time.NewTimer(restartWait)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin %s is %s (%s): %w: %w", s.id, st, lastErr, pluginapi.ErrPluginShutdown, ctx.Err())
		case <-limit.C:
			return nil, fmt.Errorf("plugin %s is still %s after %s (%s): %w", s.id, st, restartWait, lastErr, pluginapi.ErrPluginShutdown)
		}
	}
}

// callError explains an error from a call made on inst: when the process
// died under the call, the caller learns that, with ErrPluginShutdown.
func (s *supervised) callError(ctx context.Context, inst *instance, err error) error {
	if ctx.Err() != nil {
		return err
	}
	select {
	case <-inst.exited:
	default:
		if !transportError(err) {
			return err
		}
		// The broken connection may be reported a moment before the
		// supervisor sees the process gone.
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-inst.exited:
		case <-t.C:
			return err
		}
	}
	what := "it is being restarted"
	if s.host.ctx.Err() != nil {
		what = errHostStopped.Error()
	}
	if errors.Is(err, pluginapi.ErrPluginShutdown) {
		return fmt.Errorf("plugin %s exited during the call (%s): %w", s.id, what, err)
	}
	return fmt.Errorf("plugin %s exited during the call (%s): %w: %w", s.id, what, pluginapi.ErrPluginShutdown, err)
}

// transportError reports whether err looks like the connection to the
// plugin failing rather than the plugin answering with an error.
func transportError(err error) bool {
	if errors.Is(err, pluginapi.ErrPluginShutdown) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.Internal:
		return true
	}
	return false
}

// demote turns an optional plugin's errors into warnings.
func demote(diags hcl.Diagnostics, id string) hcl.Diagnostics {
	out := make(hcl.Diagnostics, 0, len(diags))
	for _, d := range diags {
		c := *d
		if c.Severity == hcl.DiagError {
			c.Severity = hcl.DiagWarning
			c.Detail = strings.TrimSuffix(c.Detail, ".") + fmt.Sprintf(". The plugin %s has required = false, so cexecd runs without it.", id)
		}
		out = append(out, &c)
	}
	return out
}

// diagsError summarizes error diagnostics on one line for LastError and logs.
func diagsError(diags hcl.Diagnostics) string {
	var msgs []string
	for _, d := range diags.Errs() {
		msgs = append(msgs, d.Error())
	}
	return strings.Join(msgs, "; ")
}
