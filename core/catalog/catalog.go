// Package catalog connects cexecd to the upstream MCP servers of cexec.hcl
// and keeps the tool catalog: every upstream tool with its schemas exactly as
// received, plus the local tools of hand-written Python packages, and the
// generated Python stub tree sandboxed code imports (ARCHITECTURE §5).
//
// Use:
//
//	cat, err := catalog.New(cfg, catalog.Options{Logger: log})
//	if err := cat.Start(ctx); err != nil { ... } // a required server failed
//	defer cat.Close()
//	stop := cat.Subscribe(func(ch catalog.Change) { ... selector.Index ... })
//	res, err := cat.Call(ctx, tenant, "filesystem", "read_text_file", args)
//
// Upstream servers connect in parallel at Start over stdio (a child process
// with an explicit environment: PATH, HOME, TMPDIR and LANG of the daemon,
// then the block's env; never the rest of the daemon's environment),
// streamable HTTP or SSE, or in process (transport "builtin": a server
// built into cexecd, Options.Builtins), through mark3labs/mcp-go, which negotiates the
// protocol version (server/discover for 2026-07-28, else initialize).
// A lost connection (process exit, broken stream, transport error) is
// replaced with exponential backoff; calls in flight fail with
// ErrConnectionLost and calls made meanwhile wait for the new connection.
// While a failed attempt's backoff runs calls fail at once, except that a
// call to an HTTP or SSE server a second or more after it starts the next
// attempt itself (callRetryAfter).
// tools/list_changed notifications refresh that server's tools, regenerate
// the stub tree and notify subscribers.
//
// A tenant-scoped server (scope = "tenant") has one such connection per
// tenant, each with the config evaluated for that tenant
// (config.ServerForTenant): Call starts the tenant's instance on its first
// call and idle ones are stopped after idle_timeout or to stay under
// max_instances. Its tools are listed by the default tenant's instance at
// Start and shared, so the stubs are the same for every tenant.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/telemetry"
)

// Defaults of Options.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	DefaultMinBackoff     = 250 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
)

// Errors of Call, matched with errors.Is.
var (
	// ErrUnknownServer: no upstream server has that name.
	ErrUnknownServer = errors.New("unknown server")
	// ErrUnavailable: the server is not connected (failed attempt, backing
	// off, or still reconnecting when the call's context ended).
	ErrUnavailable = errors.New("server unavailable")
	// ErrConnectionLost: the connection died while the call was in flight;
	// the server is being reconnected and the next call can succeed.
	ErrConnectionLost = errors.New("connection to server lost")
	// ErrTimeout: the call took longer than the server's timeout.
	ErrTimeout = errors.New("tool call timed out")
)

// Options configure a Catalog. Zero values take the defaults.
type Options struct {
	Logger hclog.Logger
	// ServersDir receives the generated stub packages (ServersDir/<package>/);
	// default: the config's servers_dir (cfg.Daemon.ServersDir), else
	// <data_dir>/servers; "-" keeps stubs in memory only. Its last element
	// must be "servers", the namespace package sandboxed code imports from.
	// Hand-written packages in it are never touched.
	ServersDir string
	// LocalServersDir holds the hand-written local tool packages; default:
	// ServersDir itself (generated packages are told apart by their
	// marker); "-" means none. Its last element must be "servers" too.
	LocalServersDir string
	// Scanner reads local tools' signatures and docstrings (with Python's
	// ast module, in a sandbox). Without one, RefreshLocal fails with
	// ErrNoSandbox.
	Scanner Scanner
	// LookupEnv reads the daemon environment variables stdio servers
	// inherit (PATH, HOME, TMPDIR, LANG); default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ConnectTimeout is the least time one connection attempt (start,
	// initialize, first tools/list) gets; a server's longer timeout wins.
	ConnectTimeout time.Duration
	// Builtins build the servers of transport "builtin" by name: each
	// tenant's instance is its own in-process MCP server (mcp-go's
	// in-process transport), built for that tenant.
	Builtins map[string]Builtin
	// MinBackoff and MaxBackoff bound the delay between reconnection
	// attempts, which doubles after each failure.
	MinBackoff, MaxBackoff time.Duration
	// Authorizer signs requests to servers with an oauth block; without
	// one they go unsigned.
	Authorizer Authorizer
}

// Authorizer gives the HTTP client of one tenant's session with an
// OAuth-protected server (core/auth.Manager).
type Authorizer interface {
	Client(s *config.MCPServer, tenant string) *http.Client
}

// Builtin builds tenant's instance of a server built into cexecd.
type Builtin func(tenant string) (*server.MCPServer, error)

// Catalog is the tool catalog and the upstream connections behind it. Its
// methods are safe for concurrent use.
type Catalog struct {
	cfg  *config.Config
	opts Options
	log  hclog.Logger
	// ups is the upstream servers, replaced whole by Reconfigure.
	ups atomic.Pointer[upstreamSet]
	// mask hides the config's secrets in what servers return and log.
	mask atomic.Pointer[secretMask]
	// reconf serialises Reconfigure.
	reconf sync.Mutex

	life   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once

	// genMu orders tool list changes: install, regenerate stubs, publish.
	genMu sync.Mutex
	subs  []*subscriber

	mu      sync.RWMutex
	upTools map[string][]Tool // by server, in listing order
	local   []Tool
	index   map[string]*Tool // by ID, Stub filled in
	stubSrc map[string][]byte
}

// New prepares a catalog of cfg's mcp_server blocks; Start connects.
func New(cfg *config.Config, opts Options) (*Catalog, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	switch {
	case opts.ServersDir != "":
	case cfg.Daemon.ServersDir != "":
		opts.ServersDir = cfg.Daemon.ServersDir
	default:
		opts.ServersDir = filepath.Join(cfg.Daemon.DataDir, "servers")
	}
	if opts.ServersDir != "-" {
		if err := checkServersDir(opts.ServersDir); err != nil {
			return nil, fmt.Errorf("stub directory: %w", err)
		}
	}
	if opts.LocalServersDir == "" {
		opts.LocalServersDir = opts.ServersDir
	}
	if opts.LocalServersDir != "-" {
		if err := checkServersDir(opts.LocalServersDir); err != nil {
			return nil, fmt.Errorf("local servers directory: %w", err)
		}
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	life, stop := context.WithCancel(context.Background())
	c := &Catalog{
		cfg:     cfg,
		opts:    opts,
		log:     opts.Logger,
		life:    life,
		stop:    stop,
		upTools: map[string][]Tool{},
		index:   map[string]*Tool{},
		stubSrc: map[string][]byte{},
	}
	c.mask.Store(newSecretMask(cfg.Secrets()))
	set := &upstreamSet{byName: map[string]*upstream{}}
	for _, s := range cfg.MCPServers {
		set.add(c.newUpstream(s))
	}
	c.ups.Store(set)
	return c, nil
}

func checkServersDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s is not an absolute path", dir)
	}
	if filepath.Base(dir) != "servers" {
		return fmt.Errorf("%s must be named servers: sandboxed code imports the servers package from its parent", dir)
	}
	return nil
}

// Start connects every upstream server in parallel, returning when each
// required one has connected or failed once: one that failed makes Start
// return an error (the caller should Close). Optional ones (optional = true)
// do not hold it up: they connect in the background, their tools joining
// the catalog when they do (npx fetching a package can take many seconds),
// and one that fails is logged and retried. Local tools are read by
// RefreshLocal, once the sandbox backend the scanner needs runs.
func (c *Catalog) Start(ctx context.Context) error {
	for _, u := range c.set().list {
		c.startUpstream(u)
	}
	var errs []error
	for _, u := range c.set().list {
		if u.cfg.Optional {
			continue
		}
		select {
		case <-u.first:
		case <-ctx.Done():
			return fmt.Errorf("connect upstream servers: %w", ctx.Err())
		}
		if u.firstErr != nil {
			errs = append(errs, fmt.Errorf("connect mcp_server %q: %w", u.cfg.Name, u.firstErr))
		}
	}
	return errors.Join(errs...)
}

// Close disconnects every server (stdio servers are stopped) and stops
// notifying subscribers.
func (c *Catalog) Close() error {
	c.closed.Do(func() {
		c.stop()
		c.wg.Wait()
		c.genMu.Lock()
		for _, s := range c.subs {
			s.close()
		}
		c.subs = nil
		c.genMu.Unlock()
	})
	return nil
}

// RemoveTenant stops tenant's instances of every tenant-scoped server, for a
// tenant whose data was removed: a tenant re-created under the same id
// starts from fresh processes, never ones holding the old tenant's state.
func (c *Catalog) RemoveTenant(tenant string) {
	for _, u := range c.set().list {
		if u.tenants != nil {
			u.tenants.remove(tenant)
		}
	}
}

// Servers returns the status of every upstream server in config order.
func (c *Catalog) Servers() []ServerStatus {
	out := make([]ServerStatus, len(c.set().list))
	for i, u := range c.set().list {
		out[i] = c.serverStatus(u)
	}
	return out
}

// Server returns the status of one upstream server.
func (c *Catalog) Server(name string) (ServerStatus, bool) {
	u := c.set().byName[name]
	if u == nil {
		return ServerStatus{}, false
	}
	return c.serverStatus(u), true
}

func (c *Catalog) serverStatus(u *upstream) ServerStatus {
	s := u.status()
	c.mu.RLock()
	tools, known := c.upTools[u.cfg.Name]
	c.mu.RUnlock()
	s.Tools = len(tools)
	if known && u.tenants != nil && s.State != StateClosed {
		s.State = StateReady
	}
	return s
}

// toolsKnown reports whether server has listed its tools at least once.
func (c *Catalog) toolsKnown(server string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.upTools[server]
	return ok
}

// Tools returns every tool: upstream servers in config order, each in the
// order it lists its tools, then local tools.
func (c *Catalog) Tools() []Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.toolsLocked()
}

func (c *Catalog) toolsLocked() []Tool {
	var out []Tool
	for _, u := range c.set().list {
		for _, t := range c.upTools[u.cfg.Name] {
			out = append(out, *c.index[t.ID])
		}
	}
	for _, t := range c.local {
		if x, ok := c.index[t.ID]; ok {
			out = append(out, *x)
		}
	}
	return out
}

// Tool returns one tool by server and name.
func (c *Catalog) Tool(server, name string) (Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.index[server+"/"+name]
	if !ok {
		return Tool{}, false
	}
	return *t, true
}

// StubSource returns the Python source of a tool by ID: the generated stub
// module of an upstream tool, the function's own source for a local tool.
func (c *Catalog) StubSource(id string) ([]byte, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if t, ok := c.index[id]; ok && t.Local != nil {
		return []byte(t.Local.Source), true
	}
	src, ok := c.stubSrc[id]
	return src, ok
}

// Refresh lists the tools of one upstream server again ("" refreshes every
// connected server and rereads the local tools), regenerating stubs and
// notifying subscribers of what changed. It waits for a server that is
// reconnecting.
func (c *Catalog) Refresh(ctx context.Context, server string) error {
	if server != "" {
		u := c.set().byName[server]
		if u == nil {
			if c.isLocalServer(server) {
				return c.RefreshLocal(ctx)
			}
			return fmt.Errorf("refresh %s: %w", server, ErrUnknownServer)
		}
		if u.tenants != nil {
			// Listed through the default tenant's instance, as at start.
			in, release, err := u.tenants.acquire(endpoint.DefaultTenant)
			if err != nil {
				return fmt.Errorf("refresh %s: %w", server, err)
			}
			defer release()
			u = in.up
		}
		cn, err := u.ready(ctx)
		if err != nil {
			return fmt.Errorf("refresh %s: %w", server, err)
		}
		if err := u.list(ctx, cn); err != nil {
			return fmt.Errorf("refresh %s: %w", server, err)
		}
		return nil
	}
	var errs []error
	if err := c.RefreshLocal(ctx); err != nil {
		errs = append(errs, fmt.Errorf("local tools: %w", err))
	}
	for _, u := range c.set().list {
		if st, _ := c.Server(u.cfg.Name); st.State != StateReady {
			continue
		}
		if err := c.Refresh(ctx, u.cfg.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Catalog) isLocalServer(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, t := range c.local {
		if t.Server == name {
			return true
		}
	}
	return false
}

// call calls tool on the upstream server with args (a JSON object; empty
// means {}) for tenant, bounded by the server's timeout. A shared server
// serves every tenant; a tenant-scoped server's call goes to tenant's own
// instance, started if it does not run. It does not validate args: that is
// the bridge's job. Errors wrap ErrUnknownServer, ErrUnavailable,
// ErrConnectionLost or ErrTimeout, or carry the server's JSON-RPC error;
// a tool that reports a failure is a result with IsError, not an error.
func (c *Catalog) call(ctx context.Context, tenant, server, tool string, args json.RawMessage) (_ *mcp.CallToolResult, err error) {
	u := c.set().byName[server]
	if u == nil {
		return nil, fmt.Errorf("call %s/%s: %w", server, tool, ErrUnknownServer)
	}
	top := u
	defer func() { err = u.redact(err) }() // u: the tenant's instance, once acquired
	if u.tenants != nil {
		in, release, err := u.tenants.acquire(tenant)
		if err != nil {
			return nil, fmt.Errorf("call %s/%s for tenant %s: %w", server, tool, tenant, err)
		}
		defer release()
		u = in.up
	}
	timeout := callTimeout(u.cfg)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cn, err := u.ready(cctx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("call %s/%s: %w after %s: %w", server, tool, ErrTimeout, timeout, err)
		}
		return nil, fmt.Errorf("call %s/%s: %w", server, tool, err)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	strays := u.strays.begin(tenant, timeout)
	defer strays.end()
	res, ferr, err := callOn(ctx, cctx, cn, server, tool, args)
	if errors.Is(err, transport.ErrSessionTerminated) && cctx.Err() == nil {
		// The server no longer knows the session (it restarted): the call
		// did not run, so it goes again on a new session.
		cn.markDead(err)
		next, rerr := u.ready(cctx)
		if rerr != nil {
			return nil, fmt.Errorf("call %s/%s: %w", server, tool, rerr)
		}
		cn = next
		res, ferr, err = callOn(ctx, cctx, cn, server, tool, args)
	}
	if ferr != nil && ctx.Err() == nil {
		// The server's own reading of the refusal may look like success;
		// the program must see that the user did not answer.
		return nil, fmt.Errorf("call %s/%s: %w", server, tool, ferr)
	}
	if err == nil {
		c.mask.Load().result(res)
		return res, nil
	}
	var signIn signInRequired
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("call %s/%s: %w", server, tool, ctx.Err())
	case errors.As(err, &signIn):
		// The connection is fine; the token is not. Keep it for after the
		// sign-in rather than reconnect in a loop.
		return nil, fmt.Errorf("call %s/%s: %w", server, tool, signIn)
	case cctx.Err() != nil:
		u.probe(cn)
		return nil, fmt.Errorf("call %s/%s: %w after %s%s", server, tool, ErrTimeout, timeout, strays.since())
	case cn.isDead() || errors.Is(err, transport.ErrTransportClosed):
		cn.markDead(err)
		switch now := c.set().byName[server]; {
		case now == nil:
			return nil, fmt.Errorf("call %s/%s: %w (server %s was removed by a config reload during the call)", server, tool, ErrConnectionLost, server)
		case now != top:
			return nil, fmt.Errorf("call %s/%s: %w (server %s was changed by a config reload during the call and restarts with its new settings)", server, tool, ErrConnectionLost, server)
		}
		return nil, fmt.Errorf("call %s/%s: %w (server %s went away during the call and is being restarted): %v", server, tool, ErrConnectionLost, server, deathCause(cn, err))
	case isConnError(err):
		cn.markDead(err)
		return nil, fmt.Errorf("call %s/%s: %w (reconnecting to %s): %v", server, tool, ErrConnectionLost, server, err)
	}
	return nil, fmt.Errorf("call %s/%s: %w", server, tool, err)
}

// callOn sends one tools/call over cn; ferr is the refusal of an
// elicitation the call made, which the server's answer may not show.
func callOn(ctx, cctx context.Context, cn *conn, server, tool string, args json.RawMessage) (_ *mcp.CallToolResult, ferr, _ error) {
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}}
	end := cn.watches.begin(server, tool, CallNoticesFrom(ctx), &req)
	cctx, slot, done := cn.calls.track(cctx)
	defer done()
	req.Params.Meta = telemetry.InjectMeta(ctx, req.Params.Meta)
	res, err := cn.client.CallTool(cctx, req)
	end()
	return res, slot.err(server), err
}

// signInRequired is an upstream's refusal for want of a (better) OAuth
// token: core/auth.SignInRequiredError.
type signInRequired interface {
	error
	SignInRequired() (server, tenant string)
}

// Retry makes server's session for tenant (a tenant-scoped server's
// instance, else the shared one) try to connect now instead of at the end
// of its backoff: called after a sign-in.
func (c *Catalog) Retry(server, tenant string) {
	u := c.set().byName[server]
	if u == nil {
		return
	}
	if u.tenants != nil {
		u.tenants.mu.Lock()
		in := u.tenants.instances[tenant]
		u.tenants.mu.Unlock()
		if in == nil {
			return
		}
		u = in.up
	}
	u.retryNow()
}

// deathCause prefers the supervisor's reason (process exited) over the
// transport's symptom (transport closed).
func deathCause(cn *conn, err error) error {
	select {
	case <-cn.dead:
		if cn.cause != nil {
			return cn.cause
		}
	default:
	}
	return err
}

// replaceTools installs the current tools of one upstream server.
func (c *Catalog) replaceTools(server string, tools []Tool) {
	c.genMu.Lock()
	defer c.genMu.Unlock()
	c.mu.RLock()
	up := maps.Clone(c.upTools)
	local := c.local
	c.mu.RUnlock()
	ch := diff(up[server], tools)
	up[server] = tools
	c.apply(ch, up, local)
}

// apply installs a new content of the catalog (every server's tools and the
// local tools) with its stub tree, then tells subscribers what changed.
// Called with genMu held, which orders changes.
func (c *Catalog) apply(ch Change, up map[string][]Tool, local []Tool) {
	if ch.empty() {
		return
	}
	c.install(up, local)
	c.mu.RLock()
	for i := range ch.Upserts {
		ch.Upserts[i] = *c.index[ch.Upserts[i].ID]
	}
	c.mu.RUnlock()
	for _, s := range c.subs {
		s.push(ch)
	}
}

// Subscribe calls fn with every change of the catalog, in order, from a
// goroutine of its own: first a Reset with every current tool, then each
// change as it happens (after the stub tree was rewritten). The returned
// function stops the calls; a call in progress finishes.
func (c *Catalog) Subscribe(fn func(Change)) (cancel func()) {
	s := newSubscriber(fn)
	c.genMu.Lock()
	c.mu.RLock()
	s.push(Change{Reset: true, Upserts: c.toolsLocked()})
	c.mu.RUnlock()
	c.subs = append(c.subs, s)
	c.genMu.Unlock()
	go s.loop()
	return func() {
		c.genMu.Lock()
		for i, x := range c.subs {
			if x == s {
				c.subs = append(c.subs[:i], c.subs[i+1:]...)
				break
			}
		}
		c.genMu.Unlock()
		s.close()
	}
}

// subscriber queues changes for one callback so publishing never waits for
// a slow subscriber.
type subscriber struct {
	fn     func(Change)
	mu     sync.Mutex
	queue  []Change
	signal chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newSubscriber(fn func(Change)) *subscriber {
	return &subscriber{fn: fn, signal: make(chan struct{}, 1), done: make(chan struct{})}
}

func (s *subscriber) push(ch Change) {
	s.mu.Lock()
	s.queue = append(s.queue, ch)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *subscriber) close() { s.once.Do(func() { close(s.done) }) }

func (s *subscriber) loop() {
	for {
		select {
		case <-s.signal:
		case <-s.done:
			return
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			ch := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			default:
			}
			s.fn(ch)
		}
	}
}
