// Package msb is the sandbox-microsandbox backend: every sandbox is a
// microVM of microsandbox, with its own kernel, whose guest runs the
// standard runtime's zygote.
//
// In CLI mode (the default) the backend drives msb 0.7: `msb create` boots
// a VM with the tenant's workspace and the /cexec directories mounted, and
// `msb exec --stream` runs the zygote with its control channel on stdin and
// stdout, so programs, call_tool and results behave as with bubblewrap. In
// server mode it speaks JSON-RPC to a 0.2-era `msb server`, whose API has
// no streaming stdin: the zygote's channel is relayed through named pipes
// in the guest, each hop one sandbox.command.run (see relay.go), or
// programs run in the server's Python REPL without host calls.
package msb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/version"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// unavailablePrefix starts every reason Capabilities gives for not
// running here.
const unavailablePrefix = "microVMs are unavailable here: "

// backend is one way of reaching microsandbox: the msb CLI or a 0.2
// server.
type backend interface {
	// probe checks that sandboxes can boot; the error says why not.
	probe(ctx context.Context) error
	// create boots a sandbox and starts its runtime.
	create(ctx context.Context, sp *spec) (box, error)
	// usage reports the backend's view of its sandboxes by box name.
	usage(ctx context.Context) (map[string]usage, error)
	// close releases what the backend holds (not its sandboxes).
	close()
}

// usage is what microsandbox reports about one sandbox.
type usage struct {
	running  bool
	rssBytes int64
}

// box is one sandbox of a backend.
type box interface {
	name() string
	exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error)
	health(ctx context.Context) error
	destroy(ctx context.Context) error
	// alive is false once the sandbox's runtime is gone.
	alive() bool
}

// entry is a live sandbox and what List reports about it.
type entry struct {
	box        box
	tenant     string
	created    time.Time
	executions atomic.Int64
	busy       atomic.Bool
	broken     atomic.Bool
}

// Plugin implements sandbox.Sandbox with microsandbox.
type Plugin struct {
	log hclog.Logger

	mu      sync.Mutex
	set     *settings
	be      backend
	probed  *error
	lib     string
	entries sandbox.Registry[*entry]
	// closing ends creations in flight when the plugin closes; Close
	// waits for entries' reservations, so that it removes what they leave.
	closing  context.Context
	shutdown context.CancelFunc
}

var _ sandbox.Sandbox = (*Plugin)(nil)

// apiVersions are the sandbox API versions the plugin speaks.
var apiVersions = []string{sandbox.APIVersion}

// New returns the backend, configured with defaults until Configure.
func New(log hclog.Logger) *Plugin {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	closing, shutdown := context.WithCancel(context.Background())
	return &Plugin{log: log, closing: closing, shutdown: shutdown}
}

// Info describes the plugin and its configuration schema.
func (p *Plugin) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         "microsandbox",
		Kind:         pluginapi.KindSandbox,
		Version:      version.Version,
		APIVersions:  apiVersions,
		ConfigSchema: configSchema,
	}, nil
}

// Configure applies the plugin's block of cexec.hcl and checks that
// microVMs can boot: when they cannot, a warning says why, so that
// `cexecd validate` shows it while a config that merely names this plugin
// still loads. Sandboxes created before keep their settings.
func (p *Plugin) Configure(ctx context.Context, config json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindSandbox, apiVersions, apiVersion); diags != nil {
		return diags, nil
	}
	s, diags := decodeConfig(config)
	if diags.HasErrors() {
		return diags, nil
	}
	be := p.newBackend(s)
	p.mu.Lock()
	old := p.be
	p.set, p.be, p.probed = s, be, nil
	p.mu.Unlock()
	if old != nil {
		old.close()
	}
	if err := p.availability(ctx, s, be); err != nil {
		attr := "msb"
		if s.api == apiServer {
			attr = "url"
		}
		diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Attribute: attr,
			Summary: "microVMs are unavailable", Detail: unavailablePrefix + err.Error()})
	}
	return diags, nil
}

func (p *Plugin) newBackend(s *settings) backend {
	if s.api == apiServer {
		return newServerBackend(s, p.log)
	}
	return newCLIBackend(s, p.log, p.libDir)
}

// current returns the configuration and backend, setting up the defaults
// when Configure was never called (as in a bare test).
func (p *Plugin) current() (*settings, backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil {
		p.set, _ = decodeConfig(nil)
		p.be = p.newBackend(p.set)
	}
	return p.set, p.be
}

// Capabilities reports what this machine allows; Available is false, with
// a reason starting "microVMs are unavailable here: ", when microsandbox
// is missing or the host cannot run microVMs (no /dev/kvm, no hardware
// virtualisation: whatever `msb doctor` says).
func (p *Plugin) Capabilities(ctx context.Context) (sandbox.Capabilities, error) {
	s, be := p.current()
	caps := sandbox.Capabilities{
		Isolation:             "microvm",
		Network:               s.allowNetwork || s.api == apiServer,
		PersistentInterpreter: true,
		// The runtime honours ExecRequest.FreshGlobals; a 0.2 server's
		// REPL runs every program in its one interpreter anyway.
		SessionInterpreter: true,
		// CreateRequest.RunAs is accepted and ignored: programs run in a
		// guest kernel, never as a host user, and tenants are apart by
		// their VMs; the VM's host process is the plugin's.
		RunAs:     true,
		Available: true,
	}
	if err := p.availability(ctx, s, be); err != nil {
		caps.Available, caps.UnavailableReason = false, unavailablePrefix+err.Error()
	}
	return caps, nil
}

// availability probes once per configuration.
func (p *Plugin) availability(ctx context.Context, s *settings, be backend) error {
	p.mu.Lock()
	if p.probed != nil && p.set == s {
		err := *p.probed
		p.mu.Unlock()
		return err
	}
	p.mu.Unlock()
	err := be.probe(ctx)
	if ctx.Err() != nil {
		// An interrupted probe says nothing about the machine.
		return err
	}
	p.mu.Lock()
	if p.set == s {
		p.probed = &err
	}
	p.mu.Unlock()
	return err
}

// Create boots a microVM and warms its zygote. Invalid requests fail with
// pluginapi.ErrInvalidArgument, a machine without microVMs with
// pluginapi.ErrUnavailable; a failure of msb itself is a *CommandError.
func (p *Plugin) Create(ctx context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	s, be := p.current()
	if err := p.availability(ctx, s, be); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w: %s%v", req.ID, pluginapi.ErrUnavailable, unavailablePrefix, err)
	}
	sp, diags, err := checkRequest(s, req)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w: %v", pluginapi.ErrInvalidArgument, err)
	}
	if err := p.entries.Reserve(req.ID); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.closing, cancel)
	defer stop()
	b, err := be.create(ctx, sp)
	if err != nil {
		p.entries.Release(req.ID)
		return nil, fmt.Errorf("create sandbox %s: %w", req.ID, err)
	}
	if !p.entries.Commit(req.ID, &entry{box: b, tenant: req.Tenant, created: time.Now()}) {
		_ = b.destroy(context.Background())
		p.entries.Release(req.ID)
		return nil, fmt.Errorf("create sandbox %s: %w", req.ID, pluginapi.ErrPluginShutdown)
	}
	return diags, nil
}

// Exec runs one program in a sandbox. A result with SandboxOK false means
// the sandbox must be destroyed rather than reused.
func (p *Plugin) Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	e, err := p.entries.Get(req.SandboxID)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	e.busy.Store(true)
	defer e.busy.Store(false)
	e.executions.Add(1)
	res, err := e.box.exec(ctx, req, host)
	if err != nil && !errors.Is(err, ctx.Err()) || !res.SandboxOK {
		e.broken.Store(true)
	}
	if err != nil {
		return res, fmt.Errorf("sandbox %s: %w", req.SandboxID, err)
	}
	return res, nil
}

// Destroy stops and removes a microVM.
func (p *Plugin) Destroy(ctx context.Context, id string) error {
	e, err := p.entries.Remove(id)
	if err != nil {
		return err
	}
	if err := e.box.destroy(ctx); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", id, err)
	}
	return nil
}

// List describes the live sandboxes with microsandbox's view of them:
// a VM that microsandbox no longer reports as running is "exited", and
// RSSBytes is the VM's memory as the guest reports it.
func (p *Plugin) List(ctx context.Context) ([]sandbox.Status, error) {
	_, be := p.current()
	entries := p.entries.All()
	if len(entries) == 0 {
		return []sandbox.Status{}, nil
	}
	use, err := be.usage(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	out := make([]sandbox.Status, 0, len(entries))
	for _, ent := range entries {
		e := ent.Box
		u, known := use[e.box.name()]
		state := "ready"
		switch {
		case !known || !u.running:
			state = "exited"
		case e.broken.Load() || !e.box.alive():
			state = "broken"
		case e.busy.Load():
			state = "busy"
		}
		out = append(out, sandbox.Status{ID: ent.ID, Tenant: e.tenant, State: state, Created: e.created,
			Executions: e.executions.Load(), RSSBytes: u.rssBytes})
	}
	return out, nil
}

// Health checks that the VM runs and its zygote answers.
func (p *Plugin) Health(ctx context.Context, id string) error {
	e, err := p.entries.Get(id)
	if err != nil {
		return err
	}
	if e.broken.Load() {
		return fmt.Errorf("sandbox %s must be recycled: an execution left it in an unknown state", id)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.box.health(ctx); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// libDir installs the runtime's Python package once per plugin process,
// for CLI mode to mount read-only at /cexec/lib. It is not byte-compiled:
// the guest's Python is not this machine's.
func (p *Plugin) libDir(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lib != "" {
		return p.lib, nil
	}
	dir, err := runtime.InstallTemp(ctx, "cexec-microsandbox-runtime-", "")
	if err != nil {
		return "", err
	}
	p.lib = dir
	return dir, nil
}

// Close destroys every sandbox, after cancelling creations in flight, and
// removes the installed runtime.
func (p *Plugin) Close() error {
	entries := p.entries.Close()
	p.shutdown()
	p.entries.Wait()
	p.mu.Lock()
	be := p.be
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := e.box.destroy(ctx); err != nil {
				p.log.Warn("destroy sandbox on close", "sandbox", e.box.name(), "error", err)
			}
		}()
	}
	wg.Wait()
	if be != nil {
		be.close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lib != "" {
		_ = os.RemoveAll(p.lib)
		p.lib = ""
	}
	return nil
}
