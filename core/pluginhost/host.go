// Package pluginhost launches, configures and supervises the plugins named in
// cexec.hcl. Each plugin is a separate process spoken to over go-plugin gRPC;
// the host hands out supervised handles that implement the kind interfaces
// and keep working across plugin restarts.
//
// Use:
//
//	h := pluginhost.New(cfg, log)
//	if diags := h.Start(ctx); diags.HasErrors() { ... } // before serving
//	defer h.Stop(stopCtx)
//	h.OnRestart(func(kind pluginapi.Kind, name string) { ... re-index ... })
//	sel, err := h.Selector("keyword") // keep it; it follows restarts
//
// A plugin's process gets only PATH, HOME, TMPDIR, LANG, the host's log
// level and its block's env; go-plugin adds its handshake variables. A crash
// is seen within milliseconds (the gRPC connection breaks), calls in flight
// fail with an error wrapping pluginapi.ErrPluginShutdown, and the plugin is
// relaunched and reconfigured with exponential backoff; calls made meanwhile
// wait for it, bounded by their ctx.
package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi"
)

// State is a plugin's lifecycle state as shown by `cexecctl plugins ls`.
type State string

// Plugin states.
const (
	// StateStarting: configured, not yet launched or still launching.
	StateStarting State = "starting"
	// StateOK: running and configured; calls go through.
	StateOK State = "ok"
	// StateRestarting: the process exited and the host is relaunching it.
	StateRestarting State = "restarting"
	// StateFailed: an optional plugin (required = false) that could not be
	// launched or configured; it stays down until the daemon restarts.
	StateFailed State = "failed"
	// StateDisabled: the host stopped the plugin (Stop was called).
	StateDisabled State = "disabled"
)

// Status is a snapshot of one configured plugin.
type Status struct {
	Kind pluginapi.Kind
	Name string
	// Version and APIVersion are what the running plugin reported in Info
	// and what the host chose; empty until it first started.
	Version    string
	APIVersion string
	State      State
	// Restarts counts successful relaunches after the process exited.
	Restarts int
	// PID of the running process; 0 when none runs.
	PID int
	// LastError says why the plugin is not ok; once it runs again after a
	// restart, how the process before ended ("...; restarted").
	LastError string
	Required  bool
}

// Host owns the plugin processes configured in one cexec.hcl.
type Host struct {
	cfg     *config.Config
	log     hclog.Logger
	plugins []*supervised
	byKey   map[string]*supervised

	// ctx bounds supervision (watchers and restarts); Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	started  bool
	stopped  bool
	onReload []func(kind pluginapi.Kind, name string)
}

// New prepares a host for the plugins configured in cfg. Nothing is launched
// until Start. A nil log discards the host's (and the plugins') logs.
func New(cfg *config.Config, log hclog.Logger) *Host {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		cfg:    cfg,
		log:    log,
		byKey:  make(map[string]*supervised),
		ctx:    ctx,
		cancel: cancel,
	}
	for _, p := range cfg.Plugins {
		s := newSupervised(h, p)
		h.plugins = append(h.plugins, s)
		h.byKey[s.id] = s
	}
	return h
}

// OnRestart registers fn to run after a plugin was relaunched and
// reconfigured following a crash, so the daemon can rebuild state the plugin
// lost (re-index a selector, flush a sandbox pool). fn runs on the
// supervisor's goroutine; calls through the plugin's handle work inside it.
func (h *Host) OnRestart(fn func(kind pluginapi.Kind, name string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onReload = append(h.onReload, fn)
}

func (h *Host) restartHooks() []func(pluginapi.Kind, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.onReload)
}

// Start launches every configured plugin in parallel, checks its Info,
// negotiates the API version, decodes its block against the schema it
// declares and configures it, all before returning, so that a bad plugin
// config stops the daemon before it serves. Errors from plugins with
// required = false become warnings and leave that plugin "failed", as do
// binaries config.Load found unusable (Load reported those). When the result
// has errors no plugin is left running.
func (h *Host) Start(ctx context.Context) hcl.Diagnostics {
	return h.start(ctx, true)
}

func (h *Host) start(ctx context.Context, repeatLoadErrors bool) hcl.Diagnostics {
	h.mu.Lock()
	if h.started || h.stopped {
		h.mu.Unlock()
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Plugin host already started",
			Detail:   "start plugins: Start may be called once per host",
		}}
	}
	h.started = true
	h.mu.Unlock()

	results := make([]hcl.Diagnostics, len(h.plugins))
	var wg sync.WaitGroup
	for i, s := range h.plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.start(ctx, repeatLoadErrors)
		}()
	}
	wg.Wait()

	var diags hcl.Diagnostics
	for _, d := range results {
		diags = append(diags, d...)
	}
	if diags.HasErrors() {
		h.killAll(ctx)
	}
	return diags
}

// Stop ends supervision and stops every plugin: a graceful shutdown over
// gRPC first, SIGKILL for processes still running when ctx ends. Handles
// fail with pluginapi.ErrPluginShutdown afterwards.
func (h *Host) Stop(ctx context.Context) {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.killAll(ctx)
}

func (h *Host) killAll(ctx context.Context) {
	h.mu.Lock()
	h.cancel()
	h.mu.Unlock()
	var insts []*instance
	for _, s := range h.plugins {
		if inst := s.disable(); inst != nil {
			insts = append(insts, inst)
		}
	}
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, inst := range insts {
			wg.Go(inst.client.Kill)
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// go-plugin waits up to 2 s for a graceful exit; the caller has
		// no more time, so end the processes now.
		for _, inst := range insts {
			killGroup(inst.pid)
		}
		<-done
	}
	// Supervisors end promptly once h.ctx is cancelled, except one in the
	// middle of a relaunch, which can take up to the plugin's timeout; it
	// kills what it launched itself (adopt), so Stop need not wait past ctx.
	supervisors := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(supervisors)
	}()
	select {
	case <-supervisors:
	case <-ctx.Done():
		h.log.Warn("stopped without waiting for a plugin relaunch in progress; it is killed when it finishes")
	}
}

// Status returns a snapshot of every configured plugin, in config order.
func (h *Host) Status() []Status {
	out := make([]Status, 0, len(h.plugins))
	for _, s := range h.plugins {
		out = append(out, s.status())
	}
	return out
}

// lookup returns the supervised plugin kind.name if it can take calls now
// or after a restart.
func (h *Host) lookup(kind pluginapi.Kind, name string) (*supervised, error) {
	s, ok := h.byKey[key(kind, name)]
	if !ok {
		return nil, fmt.Errorf("plugin %s.%s is not configured in %s: %w", kind, name, h.cfg.Path, pluginapi.ErrNotFound)
	}
	st := s.status()
	if st.State == StateFailed || st.State == StateDisabled {
		return nil, fmt.Errorf("plugin %s is %s (%s): %w", s.id, st.State, st.LastError, pluginapi.ErrPluginShutdown)
	}
	return s, nil
}

// Plugin returns a supervised handle answering Info for any kind, for
// callers that only need to prove a plugin answers (the control API's
// PingPlugin).
func (h *Host) Plugin(kind pluginapi.Kind, name string) (pluginapi.Base, error) {
	s, err := h.lookup(kind, name)
	if err != nil {
		return nil, err
	}
	return baseHandle{s}, nil
}

func key(kind pluginapi.Kind, name string) string { return string(kind) + "." + name }

// errHostStopped is the cause recorded when Stop ended a plugin.
var errHostStopped = errors.New("plugin host stopped")

// Timing of supervision. Variables rather than constants so tests in this
// package can shorten them.
var (
	// backoffMin is the delay before the first relaunch after a crash;
	// it doubles per consecutive failure up to backoffMax.
	backoffMin = 100 * time.Millisecond
	backoffMax = 10 * time.Second
	// stablePeriod: a process that ran this long resets the backoff.
	stablePeriod = 30 * time.Second
	// restartWait bounds how long a call waits for a restarting plugin
	// when its ctx allows longer.
	restartWait = 5 * time.Second
	// defaultTimeout applies when a plugin block sets no timeout.
	defaultTimeout = 10 * time.Second
)
