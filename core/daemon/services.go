package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cexec/cexec/core/auth"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/hostchan"
	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/core/pipeline"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/search"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/core/workflow"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// expireInterval is how often expired sessions are swept away: ages are
// days, so an hour late costs nothing.
const expireInterval = time.Hour

// sandboxServers is where the servers directory is mounted; the runtime puts
// /cexec on sys.path, so `servers` is importable from it.
const sandboxServers = "/cexec/servers"

// services are the daemon's long-lived components beyond the plugins.
type services struct {
	log       hclog.Logger
	cfg       *config.Config
	catalog   *catalog.Catalog
	bridge    *bridge.Bridge
	workspace *workspace.Manager
	// pool and exec are nil when no sandbox backend is configured.
	pool *pool.Pool
	exec *pipeline.Executor
	// sandbox is the backend's supervised handle, when pool is set.
	sandbox sandbox.Sandbox
	// guards is the daemon's one guard layer (policies, guard plugins, PII
	// vaults), built by startGuards. Everything that tokenizes or enforces
	// policy uses it, the MCP face included: a second vault.Store over the
	// same data_dir would issue conflicting tokens for one session.
	guards *guard.Guardrails
	// vaults are the PII vaults under data_dir: the guard layer's, and the
	// session expiry sweep removes an expired session's.
	vaults *vault.Store
	// audit writes the tenants' and the daemon's audit logs.
	audit *audit.Log
	// store is the postgres store replicas share, nil with the files
	// store.
	store *store.Postgres
	// stopResumes ends the passes that resume interrupted workflow runs;
	// resumesDone is closed when they have.
	stopResumes context.CancelFunc
	resumesDone chan struct{}
	// search is search_tools and the selector's index; set by startSearch.
	search *search.Service
	// stopScan cancels the background read of local tools and waits for it;
	// set by scanLocal.
	stopScan func()
	// approvals are the tool calls waiting for an operator's decision
	// (`cexecctl approvals`).
	approvals *pipeline.Approvals
	// auth signs requests to OAuth-protected upstreams and runs sign-ins;
	// its tokens live in data_dir/auth, outside every tenant's folder.
	auth *auth.Manager
	// workflows is the embedded workflow engine; set by startWorkflows.
	workflows *workflow.Embedded
	// hostCalls are the sandboxes' direct channels for host calls, nil
	// when the backend relays them (hostcalls.go).
	hostCalls *hostchan.Server
}

// newServices opens the workspaces and prepares the catalog, which reads
// local tools in sandboxes of the plugins' backend; Start on the catalog
// connects the upstream servers, startExec builds the pool and the
// executor once the plugins run. On error, call close.
func newServices(cfg *config.Config, plugins sandboxes, log hclog.Logger) (_ *services, err error) {
	s := &services{log: log, cfg: cfg, approvals: pipeline.NewApprovals()}

	vaultOpts := vault.Options{DataDir: cfg.Daemon.DataDir, Logger: log}
	wsOpts := workspace.OptionsFromConfig(cfg)
	if s.store, err = openStore(cfg, &vaultOpts, &wsOpts, log); err != nil {
		return s, err
	}
	if s.vaults, err = vault.NewStore(vaultOpts); err != nil {
		return s, fmt.Errorf("open pii vaults: %w", err)
	}
	if s.store != nil {
		subscribeStore(s.store, s.vaults)
		s.approvals = shareApprovals(s.store, log.Named("approvals"))
	}
	wsOpts.Logger = log.Named("workspace")
	wsOpts.ExpireInterval = expireInterval
	wsOpts.ExpireVault = s.vaults.Delete
	if fi, err := os.Stat(cfg.Daemon.SkillsDir); err == nil && fi.IsDir() {
		wsOpts.SharedSkillsDir = cfg.Daemon.SkillsDir
	}
	wsOpts.SharedWorkflowsDir = sharedWorkflowsDir(cfg.Daemon.SkillsDir)
	wsOpts.OnRemove = s.removeTenant
	switch {
	case os.Geteuid() != 0:
		// Sandboxes run as cexecd's own user, which owns everything.
	case cfg.Daemon.TenantUIDs != nil:
		wsOpts.TenantUIDs = cfg.Daemon.TenantUIDs
	default:
		// Sandbox backends never run programs as root; the bwrap plugin's
		// default host user is nobody (run_as_uid/run_as_gid).
		wsOpts.Owner = &workspace.Owner{UID: 65534, GID: 65534}
		log.Warn("cexecd runs as root without cexec.tenant_uids: every tenant's sandboxes run as one host user (nobody), who can reach every tenant's workspace; set tenant_uids to give each tenant its own")
	}
	if s.workspace, err = workspace.New(wsOpts); err != nil {
		return s, fmt.Errorf("open workspaces: %w", err)
	}
	s.audit = audit.New(audit.Options{
		Tenants:    s.workspace,
		DaemonDir:  filepath.Join(cfg.Daemon.DataDir, "audit"),
		RotateSize: cfg.Audit.RotateSize,
		Keep:       cfg.Audit.Keep,
		Sync:       cfg.Daemon.Sync == "always",
		Shared:     s.store != nil,
		Logger:     log.Named("audit"),
	})

	if err := os.MkdirAll(cfg.Daemon.ServersDir, 0o755); err != nil {
		return s, fmt.Errorf("create servers_dir: %w", err)
	}
	store, err := auth.OpenStore(filepath.Join(cfg.Daemon.DataDir, "auth"))
	if err != nil {
		return s, fmt.Errorf("open oauth token store: %w", err)
	}
	s.auth = auth.NewManager(cfg, store, nil, log.Named("auth"))
	s.catalog, err = catalog.New(cfg, catalog.Options{
		Authorizer:      s.auth,
		Logger:          log.Named("catalog"),
		ServersDir:      cfg.Daemon.ServersDir,
		LocalServersDir: cfg.Daemon.ServersDir,
		Scanner:         sandboxScanner{plugins: plugins, backend: cfg.Sandbox.Backend},
		Builtins:        builtinServers(s.workspace),
	})
	if err != nil {
		return s, fmt.Errorf("prepare tool catalog: %w", err)
	}
	s.auth.OnSignIn(s.catalog.Retry)
	if s.store != nil {
		shareSignIns(s.store, s.auth, s.catalog.Retry, log)
	}
	s.bridge = bridge.New(s.catalog, log.Named("bridge"), bridgeLimits(cfg))
	return s, nil
}

// startExec builds the sandbox pool and the executor over the configured
// sandbox backend. Without a running backend, exec stays unavailable.
func (s *services) startExec(host *pluginhost.Host) (err error) {
	cfg, log := s.cfg, s.log
	if err := s.startGuards(host); err != nil {
		return err
	}
	if cfg.Sandbox.Backend == "" {
		log.Warn("no sandbox backend configured: exec and execute_code are unavailable")
		return nil
	}
	sb, err := host.Sandbox(cfg.Sandbox.Backend)
	if err != nil {
		if errors.Is(err, pluginapi.ErrNotFound) || errors.Is(err, pluginapi.ErrPluginShutdown) {
			log.Warn("sandbox backend is not running: exec is unavailable", "backend", cfg.Sandbox.Backend, "error", err)
			return nil
		}
		return fmt.Errorf("sandbox backend %s: %w", cfg.Sandbox.Backend, err)
	}
	if err := s.checkBackend(sb); err != nil {
		return err
	}
	if sb, err = s.directHostCalls(sb); err != nil {
		return err
	}
	pc := cfg.Sandbox.Pool
	s.pool, err = pool.New(sb, pool.Config{
		Warm:         pc.Warm,
		MaxTotal:     pc.MaxTotal,
		IdleTimeout:  pc.IdleTimeout,
		MaxUses:      pc.MaxUses,
		QueueTimeout: pc.QueueTimeout,
		Template:     s.sandboxTemplate,
	}, log.Named("pool"))
	if err != nil {
		return err
	}
	host.OnRestart(func(kind pluginapi.Kind, name string) {
		if kind == pluginapi.KindSandbox && name == cfg.Sandbox.Backend {
			log.Warn("sandbox backend restarted: its sandboxes died with it; refilling the pool")
			s.pool.Flush()
		}
	})
	s.sandbox = sb
	s.pool.Prewarm(endpoint.DefaultTenant)
	s.exec = &pipeline.Executor{Pool: s.pool, Sandbox: sb, Workspaces: s.workspace, Tools: s.bridge, Log: log.Named("exec"),
		Approvals: s.approvals, MaxInlineAttachment: cfg.Pipeline.MaxInlineAttachment, Audit: s.audit, SignIn: signIn{s.auth},
		SessionInterpreter: cfg.Sandbox.SessionInterpreter}
	if s.guards != nil {
		s.exec.Guard = s.guards
	}
	return nil
}

// closeWorkflows stops the runs where they are; they resume at the next
// start.
func (s *services) closeWorkflows() {
	if s.stopResumes != nil {
		s.stopResumes()
		<-s.resumesDone
	}
	if s.workflows != nil {
		s.workflows.Close()
	}
}

// sandboxTemplate is what every sandbox of tenant is created with.
func (s *services) sandboxTemplate(tenant string) (sandbox.CreateRequest, error) {
	t, err := s.workspace.Tenant(tenant)
	if err != nil {
		return sandbox.CreateRequest{}, err
	}
	servers, err := s.serverMounts(t)
	if err != nil {
		return sandbox.CreateRequest{}, err
	}
	lim := s.cfg.Sandbox.Limits
	return sandbox.CreateRequest{
		Mounts: append(t.Mounts(), servers...),
		Limits: sandbox.Limits{
			MemoryBytes: lim.Memory,
			Pids:        int64(lim.PIDs),
			Timeout:     lim.Timeout,
			OutputBytes: lim.Output,
			TmpBytes:    lim.Tmp,
			ShmBytes:    lim.Shm,
			FileBytes:   lim.MaxFileSize,
		},
		Network: s.cfg.Sandbox.Network,
		RunAs:   s.runAs(t),
	}, nil
}

// runAs is the host user tenant t's sandboxes run as: its own with
// tenant_uids, else the backend's default.
func (s *services) runAs(t *workspace.Tenant) *sandbox.HostUser {
	if s.workspace.TenantUIDs() == nil {
		return nil
	}
	o := t.Owner()
	return &sandbox.HostUser{UID: uint32(o.UID), GID: uint32(o.GID)}
}

// checkBackend refuses, at start, a sandbox backend that cannot do what
// the config asks of every sandbox; otherwise each creation would fail
// later, one execution at a time.
func (s *services) checkBackend(sb sandbox.Sandbox) error {
	uids := s.workspace.TenantUIDs() != nil
	if !uids && !s.cfg.Sandbox.Network {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caps, err := sb.Capabilities(ctx)
	if err != nil {
		return fmt.Errorf("sandbox backend %s: capabilities: %w", s.cfg.Sandbox.Backend, err)
	}
	return backendFits(s.cfg.Sandbox, caps, uids)
}

// backendFits says what a backend with caps lacks for cfg. A backend
// without RunAs (one built before CreateRequest.RunAs) would run every
// tenant as one user, which the workspace no longer lets in. A backend
// that is unavailable for now (a cluster out of reach) cannot say what it
// allows, and says why it is unavailable itself.
func backendFits(cfg config.Sandbox, caps sandbox.Capabilities, tenantUIDs bool) error {
	switch {
	case tenantUIDs && !caps.RunAs:
		return fmt.Errorf("sandbox backend %s cannot run sandboxes as their tenant's host user (cexec.tenant_uids is set); update the plugin or remove tenant_uids", cfg.Backend)
	case cfg.Network && !caps.Network && caps.UnavailableReason == "":
		return fmt.Errorf("sandbox backend %s does not give sandboxes network access, which sandbox.network = true asks for; allow it in the plugin's block (bwrap, k8s, microsandbox: allow_network = true) or remove network", cfg.Backend)
	case cfg.SessionInterpreter && !caps.SessionInterpreter && caps.UnavailableReason == "":
		return fmt.Errorf("sandbox backend %s cannot run a session's executions in one interpreter with fresh globals, which sandbox.session_interpreter = true asks for; update the plugin (bwrap, k8s and microsandbox have it) or remove session_interpreter", cfg.Backend)
	}
	return nil
}

// removeTenant destroys the sandboxes and stops the per-tenant upstream
// instances of a tenant GC removed.
func (s *services) removeTenant(tenant string) {
	metrics.ForgetTenant(tenant)
	s.audit.Forget(tenant)
	if p := s.pool; p != nil {
		p.RemoveTenant(tenant)
	}
	if c := s.catalog; c != nil {
		c.RemoveTenant(tenant)
	}
}

// closePool destroys every sandbox, waiting up to grace.
func (s *services) closePool(ctx context.Context, grace time.Duration) {
	if s.pool == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if err := s.pool.Close(ctx); err != nil {
		s.log.Warn("close sandbox pool", "error", err)
	}
	s.closeHostCalls()
}

func (s *services) close(ctx context.Context) {
	s.closePool(ctx, 5*time.Second)
	if s.search != nil {
		s.search.Close()
	}
	if s.catalog != nil {
		if err := s.catalog.Close(); err != nil {
			s.log.Warn("close tool catalog", "error", err)
		}
	}
	if s.workspace != nil {
		if err := s.workspace.Close(); err != nil {
			s.log.Warn("close workspaces", "error", err)
		}
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.log.Warn("close postgres store", "error", err)
		}
	}
}

// bridgeLimits are the caps of one tool call: sandbox.limits', overridden
// per mcp_server.
func bridgeLimits(cfg *config.Config) bridge.Limits {
	l := bridge.Limits{
		Default: bridge.CallLimits{MaxArgument: cfg.Sandbox.Limits.MaxArgumentSize, MaxResult: cfg.Sandbox.Limits.MaxResultSize},
		Servers: map[string]bridge.CallLimits{},
	}
	for _, s := range cfg.MCPServers {
		l.Servers[s.Name] = bridge.CallLimits{MaxArgument: s.MaxArgumentSize, MaxResult: s.MaxResultSize}
	}
	return l
}
