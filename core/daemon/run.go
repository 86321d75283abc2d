// Package daemon is the cexecd daemon: it loads cexec.hcl, starts the plugins
// and serves the control API on a unix socket until its context ends.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/internal/localgrpc"
	"github.com/cexec/cexec/internal/plural"
	"github.com/cexec/cexec/internal/version"
)

// DefaultConfigFile is loaded from the working directory when no -config is
// given.
const DefaultConfigFile = "cexec.hcl"

// DefaultShutdownTimeout bounds a clean shutdown: in-flight calls get this
// long, then connections and plugins are closed hard.
const DefaultShutdownTimeout = 10 * time.Second

// ErrInvalidConfig is wrapped by errors about a config with error
// diagnostics; the diagnostics themselves were already written to Stderr.
var ErrInvalidConfig = errors.New("invalid configuration")

// Options configure Run and Validate.
type Options struct {
	// ConfigFile is the config to load. "" means ./cexec.hcl when it
	// exists, else the built-in defaults.
	ConfigFile string
	// Overrides are the command-line flags, which win over the file and
	// CEXEC_* variables.
	Overrides config.Overrides
	// LogJSON writes JSON log lines instead of human-readable ones.
	LogJSON bool
	// Stderr receives logs and diagnostics; nil means os.Stderr.
	Stderr io.Writer
	// Started is when the process started; "socket ready" is logged with
	// the time elapsed since. Zero means when Run was called.
	Started time.Time
	// ShutdownTimeout bounds shutdown; zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
}

// newLogger logs to stderr only: stdout belongs to go-plugin's and MCP's
// protocols in the processes cexec starts.
func newLogger(o *Options, level string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "cexecd",
		Level:      hclog.LevelFromString(level),
		Output:     o.Stderr,
		JSONFormat: o.LogJSON,
	})
}

// loadConfig resolves which file to load and loads it. cfg is nil only when
// the file cannot be read or parsed.
func loadConfig(o *Options, log hclog.Logger) (*config.Config, hcl.Diagnostics, error) {
	path := o.ConfigFile
	if path == "" {
		switch _, err := os.Stat(DefaultConfigFile); {
		case err == nil:
			path = DefaultConfigFile
		case errors.Is(err, fs.ErrNotExist):
			log.Info("no config file given and no ./" + DefaultConfigFile + "; using built-in defaults")
			cfg, diags := config.Defaults(o.Overrides)
			return cfg, diags, nil
		default:
			return nil, nil, fmt.Errorf("check for ./%s: %w", DefaultConfigFile, err)
		}
	}
	log.Info("loading config", "file", path)
	cfg, diags := config.Load(path, o.Overrides)
	return cfg, diags, nil
}

// report writes diags with file:line to stderr and returns an error
// wrapping ErrInvalidConfig when any is an error.
func report(o *Options, cfg *config.Config, diags hcl.Diagnostics) error {
	if len(diags) == 0 {
		return nil
	}
	var files map[string]*hcl.File
	if cfg != nil {
		files = cfg.Files()
	}
	if err := config.FormatDiagnostics(o.Stderr, diags, files); err != nil {
		return fmt.Errorf("write diagnostics: %w", err)
	}
	if diags.HasErrors() {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, countDiags(diags))
	}
	return nil
}

func countDiags(diags hcl.Diagnostics) string {
	errs := len(diags.Errs())
	return plural.Count(errs, "error") + ", " + plural.Count(len(diags)-errs, "warning")
}

// Validate is `cexecd validate`: load the config and validate every plugin
// it names (launch, decode its block against its schema, Configure, stop),
// writing each diagnostic with file:line. It returns an error wrapping
// ErrInvalidConfig when there are errors.
func Validate(ctx context.Context, o Options) error {
	o.defaults()
	log := newLogger(&o, logLevel(o.Overrides.LogLevel, "warn"))
	cfg, diags, err := loadConfig(&o, log)
	if err != nil {
		return err
	}
	// Go on past errors in the file: the plugins' own diagnostics are
	// worth reporting in the same pass.
	if cfg != nil {
		diags = dedupe(append(diags, pluginhost.Validate(ctx, cfg, log)...))
		diags = append(diags, policyDiags(cfg)...)
	}
	return report(&o, cfg, diags)
}

func logLevel(flag, fallback string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(config.EnvLogLevel); v != "" {
		return v
	}
	return fallback
}

// Run is the daemon: load the config, claim the socket, start the plugins
// (in parallel, before serving), serve the control API and, when ctx ends,
// shut down within Options.ShutdownTimeout: stop accepting, let in-flight
// calls finish, stop the plugins and remove the socket. It returns nil after
// a clean shutdown.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	hup := notifyHUP()
	defer signal.Stop(hup)
	log := newLogger(&o, logLevel(o.Overrides.LogLevel, "info"))
	cfg, err := loadForRun(&o, log)
	if err != nil {
		return err
	}
	raiseFileLimit(log, cfg.MCP)
	claim, err := claimSocket(ctx, cfg.Daemon.Socket, log)
	if err != nil {
		return err
	}
	defer claim.release()
	if err := os.MkdirAll(cfg.Daemon.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	dirLock, err := lockDataDir(cfg.Daemon.DataDir, cfg.Daemon.Socket, cfg.Store.Kind == config.StorePostgres)
	if err != nil {
		return err
	}
	defer dirLock.release()

	// Deferred calls run in reverse: the MCP face, the search index and the
	// pool stop before the plugins, which stop before the services close.
	grace := o.ShutdownTimeout / 2
	stopTracing, err := startTracing(ctx, cfg, grace, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	host := pluginhost.New(cfg, log.Named("plugins"))
	svc, err := newServices(cfg, host, log)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		svc.close(stopCtx)
	}()
	if err != nil {
		return err
	}
	defer stopPlugins(ctx, host, grace, log)
	if stopped, err := startComponents(ctx, &o, cfg, svc, host); stopped || err != nil {
		return err
	}
	// The scan's sandbox is destroyed before its backend plugin stops.
	defer svc.stopScan()
	defer svc.closePool(context.WithoutCancel(ctx), grace)
	defer svc.search.Close()
	// Workflow runs stop before the pool and the plugins they use.
	svc.startWorkflows(ctx)
	defer svc.closeWorkflows()

	// The MCP face listens before the control socket, so a daemon that
	// answers Status also serves MCP and reports where; it stops before the
	// pool and plugins.
	face, err := startMCP(ctx, cfg, svc, host, log, grace)
	if err != nil {
		return err
	}
	defer face.stop()
	ms, err := startMetrics(cfg, svc, host, face, log)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		ms.stop(stopCtx)
	}()
	rl := newReloader(&o, cfg, svc, log)
	defer rl.watch(ctx, hup)()
	srv := newControlServer(ctx, &o, cfg, svc, host, face.state(), rl.config)
	return serveControl(ctx, &o, cfg, claim, srv, log)
}

// loadForRun loads the config and fails on any error in it, tenant
// policies included, before anything starts.
func loadForRun(o *Options, log hclog.Logger) (*config.Config, error) {
	cfg, diags, err := loadConfig(o, log)
	if err != nil {
		return nil, err
	}
	if err := report(o, cfg, diags); err != nil {
		return nil, err
	}
	if err := report(o, cfg, policyDiags(cfg)); err != nil {
		return nil, err
	}
	log.SetLevel(hclog.LevelFromString(cfg.Daemon.LogLevel))
	return cfg, nil
}

// startComponents connects the upstream servers while the plugins start,
// then builds the executor over the sandbox backend, reads the local tools
// in it and starts the search index. stopped is true when ctx ended while
// the plugins started.
func startComponents(ctx context.Context, o *Options, cfg *config.Config, svc *services, host *pluginhost.Host) (stopped bool, err error) {
	log := svc.log
	catalogStarted := make(chan error, 1)
	go func() { catalogStarted <- svc.catalog.Start(ctx) }()

	diags := host.Start(ctx)
	if ctx.Err() != nil {
		log.Info("stopped while starting plugins", "cause", context.Cause(ctx))
		return true, nil
	}
	if err := report(o, cfg, diags); err != nil {
		return false, fmt.Errorf("start plugins: %w", startError(err, diags))
	}
	// Only required upstream servers hold up serving; optional ones
	// (optional = true) keep connecting in the background.
	if err := <-catalogStarted; err != nil {
		return false, fmt.Errorf("connect upstream MCP servers: %w", err)
	}
	if err := svc.startExec(host); err != nil {
		return false, err
	}
	// Local tools are parsed in a sandbox of the backend, so only now. Like
	// optional upstreams they join the catalog, and the search index that
	// follows it, in the background instead of holding up serving.
	svc.scanLocal(ctx)
	svc.startSearch(host)
	return false, nil
}

// startError is why the plugins did not start: report's invalid
// configuration error when the file is to blame, else which plugins failed
// to start and why, since a plugin that crashed is no mistake in the file.
func startError(reported error, diags hcl.Diagnostics) error {
	var failed []error
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		se, ok := hcl.DiagnosticExtra[*pluginhost.StartError](d)
		if !ok {
			return reported
		}
		failed = append(failed, se)
	}
	return errors.Join(failed...)
}

// stopPlugins stops every plugin, waiting up to grace.
func stopPlugins(ctx context.Context, host *pluginhost.Host, grace time.Duration, log hclog.Logger) {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	host.Stop(stopCtx)
	log.Info("plugins stopped")
}

// newControlServer registers the control API over the daemon's services.
func newControlServer(ctx context.Context, o *Options, cfg *config.Config, svc *services, host *pluginhost.Host, mcp control.MCPState, current func() *config.Config) *controlServer {
	log := svc.log
	schemas := &schemaCache{}
	schemas.fill(ctx, cfg, host, log)
	cutOpts, cut := newCutoff()
	srv := grpc.NewServer(append(localgrpc.ServerOptions(), cutOpts...)...)
	ctl := control.New(control.Deps{
		Version: version.Version,
		Started: o.Started,
		Socket:  cfg.Daemon.Socket,
		PID:     os.Getpid(),
		MCP:     mcp,
		Plugins: pluginsView{host},
		Config:  &configView{current: current, ov: o.Overrides, schemas: schemas, log: log},
		Exec:    execService{svc.exec},
		Tasks:   taskService{svc.newTasks(host)},
		Log:     log.Named("control"),

		Workspaces:    svc.workspace,
		DefaultTenant: endpoint.DefaultTenant,
		Pool:          svc.poolView(),

		Tools:  toolsView{Catalog: svc.catalog, search: svc.search},
		Search: svc.search,
	})
	ctl.Register(srv)
	ctl.Interactive().Register(srv)
	control.NewApprovals(approvalQueue{svc.approvals}).Register(srv)
	control.NewAuth(svc.auth).Register(srv)
	control.RegisterWorkflows(srv, control.WorkflowDeps{
		Engine: svc.workflows, Workspaces: svc.workspace, Load: svc.loadWorkflow, DefaultTenant: endpoint.DefaultTenant,
	})
	load := func() (*config.Config, hcl.Diagnostics, error) { return loadConfig(o, log) }
	cexecv1.RegisterOperationsServer(srv, &operations{cfg: current, load: load, audit: svc.audit,
		ws: svc.workspace, cat: svc.catalog, host: host})
	return &controlServer{Server: srv, cut: cut}
}

// serveControl serves the control API on the claimed socket until ctx ends,
// then stops the server within half the shutdown timeout.
func serveControl(ctx context.Context, o *Options, cfg *config.Config, claim *socketClaim, srv *controlServer, log hclog.Logger) error {
	ln, err := claim.listen()
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("socket ready", "socket", cfg.Daemon.Socket, "elapsed", time.Since(o.Started).Round(10*time.Microsecond),
		"plugins", len(cfg.Plugins), "version", version.Version, "pid", os.Getpid())

	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx))
	case err := <-served:
		return fmt.Errorf("serve control api: %w", err)
	}
	stopServer(srv, o.ShutdownTimeout/2, log)
	return nil
}

// stopServer stops accepting and waits up to grace for in-flight calls
// (an Exec stream may run long), then cuts the rest off, saying why.
func stopServer(srv *controlServer, grace time.Duration, log hclog.Logger) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		log.Warn("calls still running at shutdown; closing them", "grace", grace)
		srv.cut(errShutDown)
		srv.Stop()
		<-done
	}
}

// ExitCode maps Run's and Validate's errors to cexecd's exit status: 0 ok,
// 1 failure (including an invalid configuration), 3 another daemon owns the
// socket. 2 is left to usage errors, as the flag package uses it.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrAlreadyRunning):
		return 3
	}
	return 1
}
