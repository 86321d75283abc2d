package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/ctxsleep"
	"github.com/cexec/cexec/internal/version"
)

// State is an upstream server's connection state.
type State string

// Connection states.
const (
	// StateConnecting: the first connection attempt is under way.
	StateConnecting State = "connecting"
	// StateReady: connected; calls go through.
	StateReady State = "ready"
	// StateReconnecting: the connection was lost (process exit, HTTP
	// failure) or the last attempt failed, and a new attempt is under way;
	// calls wait for it.
	StateReconnecting State = "reconnecting"
	// StateBackoff: the last attempt failed; the next one starts after a
	// backoff delay. Calls fail at once with the last error, except that a
	// call to an HTTP or SSE server starts an attempt of its own, and
	// waits for it, when the last one ended callRetryAfter ago or more.
	StateBackoff State = "backoff"
	// StateClosed: the catalog was closed.
	StateClosed State = "closed"
)

// stableAfter is how long a connection must have lived for its loss to
// count as a fresh failure, restarting without delay.
const stableAfter = 10 * time.Second

// callRetryAfter is how long after a failed attempt a call to a network
// server may start another, cutting the backoff short: a server back from
// a restart then serves the next call, not the first after a backoff that
// has grown to MaxBackoff, and calls still cannot start attempts faster
// than this. Stdio servers wait out their backoff, since each attempt
// spawns a process and calls would set the pace of a crash loop.
const callRetryAfter = time.Second

// ServerStatus is a snapshot of one upstream server.
type ServerStatus struct {
	Name      string
	Transport string
	Optional  bool
	State     State
	// ProtocolVersion is the MCP protocol version negotiated with the server
	// on the current (or last) connection.
	ProtocolVersion string
	// ServerName and ServerVersion are what the server reported.
	ServerName    string
	ServerVersion string
	Tools         int
	// PID is the stdio server's process id while it runs, else 0.
	PID int
	// Restarts counts connections lost and re-established.
	Restarts int
	// ListChanged counts tools/list_changed notifications followed.
	ListChanged int
	// Scope is config.ScopeShared or config.ScopeTenant. A tenant-scoped
	// server is StateReady once its tools are known: its instances start
	// on demand, and Instances lists those running.
	Scope     string
	Instances []InstanceStatus
	// LastError is why the last connection attempt failed or the last
	// connection was lost.
	LastError   string
	ConnectedAt time.Time
	// StrayLines counts the lines a stdio server wrote on stdout that are
	// not JSON-RPC messages (banners, debug prints, broken answers), which
	// the client skips; LastStrayLine is the last of them, secrets masked,
	// cut to 200 bytes.
	// For a tenant-scoped server, the sum over its running instances and
	// the latest line of any.
	StrayLines    int
	LastStrayLine string
	lastStrayAt   time.Time
}

// conn is one live connection to an upstream server.
type conn struct {
	client   *client.Client
	proc     *stdioProcess
	protocol string
	info     mcp.Implementation
	cancel   context.CancelFunc
	stops    []func()
	// kick is signalled by tools/list_changed notifications.
	kick chan struct{}
	// watches route the server's progress and log notifications.
	watches   watches
	dead      chan struct{}
	deadOnce  sync.Once
	cause     error
	closeOnce sync.Once
	// calls are the calls in progress, to attribute elicitations to.
	calls *inflight
	// probing: a ping after a timed-out call is under way (probe).
	probing atomic.Bool
}

func newConn(cli *client.Client, proc *stdioProcess, cancel context.CancelFunc, calls *inflight) *conn {
	return &conn{client: cli, proc: proc, cancel: cancel, kick: make(chan struct{}, 1), dead: make(chan struct{}), calls: calls}
}

// markDead records that the connection is unusable; the supervisor then
// replaces it.
func (c *conn) markDead(err error) {
	c.deadOnce.Do(func() {
		c.cause = err
		close(c.dead)
	})
}

func (c *conn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// close ends the connection: the client first, so a stdio server sees its
// stdin close and exits on its own, then the context that kills it.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.markDead(errors.New("connection closed"))
		for _, stop := range c.stops {
			stop()
		}
		_ = c.client.Close()
		c.cancel()
		if c.proc != nil {
			_ = c.proc.stderr.Close()
		}
	})
}

// upstream supervises the connection to one mcp_server.
type upstream struct {
	cat *Catalog
	cfg *config.MCPServer
	log hclog.Logger
	// tenant is whose session this is: the instance's tenant for a
	// tenant-scoped server, else the default tenant.
	tenant string
	// retry cuts a backoff short (after a sign-in).
	retry chan struct{}
	// tenants, for a tenant-scoped server, runs its per-tenant instances;
	// this upstream then only stands for the server as a whole.
	tenants *tenants

	mu          sync.Mutex
	state       State
	conn        *conn
	wake        chan struct{} // closed and replaced on every state change
	lastErr     error
	failedAt    time.Time // when the last attempt failed (StateBackoff)
	protocol    string
	info        mcp.Implementation
	restarts    int
	listChanged int
	connectedAt time.Time
	// strays counts what a stdio server wrote on stdout that the client skips.
	strays strays
	// listen: this streamable HTTP server speaks a protocol version before
	// 2026-07-28, so it needs the GET stream (dial).
	listen bool

	// refreshMu orders tool listings so an older list never replaces a newer.
	refreshMu sync.Mutex

	first     chan struct{} // closed when the first attempt ended
	firstErr  error
	firstOnce sync.Once

	// stop ends run; done is closed when it returned (Reconfigure).
	stop context.CancelFunc
	done chan struct{}
}

func newUpstream(cat *Catalog, s *config.MCPServer) *upstream {
	return &upstream{
		cat:    cat,
		cfg:    s,
		log:    cat.log.Named(s.Name),
		tenant: endpoint.DefaultTenant,
		retry:  make(chan struct{}, 1),
		state:  StateConnecting,
		wake:   make(chan struct{}),
		first:  make(chan struct{}),
		done:   make(chan struct{}),
	}
}

func (u *upstream) setState(st State, c *conn, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.state, u.conn = st, c
	if err != nil {
		u.lastErr = err
	}
	if st == StateBackoff {
		u.failedAt = time.Now()
	}
	if c != nil {
		u.protocol, u.info, u.connectedAt = c.protocol, c.info, time.Now()
	}
	close(u.wake)
	u.wake = make(chan struct{})
}

func (u *upstream) firstDone(err error) {
	u.firstOnce.Do(func() {
		u.firstErr = err
		close(u.first)
	})
}

// run keeps the server connected until ctx ends: connect, wait for the
// connection to die, reconnect with exponential backoff.
func (u *upstream) run(ctx context.Context) {
	if u.tenants != nil {
		u.tenants.run(ctx, u)
		return
	}
	opts := &u.cat.opts
	backoff := opts.MinBackoff
	for {
		c, err := u.connect(ctx)
		if ctx.Err() != nil {
			if c != nil {
				c.close()
			}
			u.setState(StateClosed, nil, nil)
			u.firstDone(fmt.Errorf("catalog closed: %w", ctx.Err()))
			return
		}
		if err != nil {
			u.setState(StateBackoff, nil, err)
			u.firstDone(err)
			u.log.Warn("connect failed", "error", err, "retry_in", backoff)
			if !u.backoff(ctx, backoff) {
				u.setState(StateClosed, nil, nil)
				return
			}
			backoff = min(2*backoff, opts.MaxBackoff)
			u.setState(StateReconnecting, nil, nil)
			continue
		}
		u.setState(StateReady, c, nil)
		u.firstDone(nil)
		u.log.Info("connected", "protocol", c.protocol, "server", c.info.Name, "version", c.info.Version, "pid", pidOf(c))

		select {
		case <-c.dead:
		case <-ctx.Done():
			c.close()
			u.setState(StateClosed, nil, nil)
			return
		}
		u.mu.Lock()
		lived := time.Since(u.connectedAt)
		u.restarts++
		u.mu.Unlock()
		cause := u.redact(c.cause)
		u.setState(StateReconnecting, nil, fmt.Errorf("connection lost: %w", cause))
		u.log.Warn("connection lost; reconnecting", "error", cause)
		c.close()
		if lived >= stableAfter {
			backoff = opts.MinBackoff
			continue
		}
		if ctxsleep.Sleep(ctx, backoff) != nil {
			u.setState(StateClosed, nil, nil)
			return
		}
		backoff = min(2*backoff, opts.MaxBackoff)
	}
}

// backoff waits d, or less when retryNow is called; false when ctx ended.
func (u *upstream) backoff(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-u.retry:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryNow ends a backoff at once. The state leaves backoff here, not when
// the supervisor wakes, so that a call made right after (a program's call
// retried after a sign-in) waits for the new attempt rather than failing
// with the old error.
func (u *upstream) retryNow() {
	u.mu.Lock()
	if u.state == StateBackoff {
		u.leaveBackoffLocked()
	}
	u.mu.Unlock()
	u.signalRetry()
}

// retryForCall cuts the backoff short for a call, under callRetryAfter's
// terms; true when it did (or another call just did), so the call waits
// for the attempt.
func (u *upstream) retryForCall() bool {
	if u.cfg.Transport != config.TransportHTTP && u.cfg.Transport != config.TransportSSE {
		return false
	}
	u.mu.Lock()
	switch {
	case u.state == StateReconnecting:
		u.mu.Unlock()
		return true
	case u.state != StateBackoff || time.Since(u.failedAt) < callRetryAfter:
		u.mu.Unlock()
		return false
	}
	u.leaveBackoffLocked()
	u.mu.Unlock()
	u.signalRetry()
	return true
}

func (u *upstream) leaveBackoffLocked() {
	u.state = StateReconnecting
	close(u.wake)
	u.wake = make(chan struct{})
}

func (u *upstream) signalRetry() {
	select {
	case u.retry <- struct{}{}:
	default:
	}
}

func pidOf(c *conn) int {
	if c.proc == nil {
		return 0
	}
	return c.proc.pid()
}

// connect makes one connection attempt, bounded by the server's timeout or
// the connect timeout, whichever is longer: a server slow to start (a JVM,
// npx fetching its package) is given the time its block allows.
func (u *upstream) connect(ctx context.Context) (*conn, error) {
	d := max(u.cat.opts.ConnectTimeout, u.cfg.Timeout)
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	u.mu.Lock()
	listen := u.listen
	u.mu.Unlock()
	strays := u.strays.count()
	c, relisten, err := u.dial(actx, listen)
	if relisten {
		u.mu.Lock()
		u.listen = true
		u.mu.Unlock()
		c, _, err = u.dial(actx, true)
	}
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("server %s did not answer within %s (its timeout, at least %s; raise it if the server starts slowly)%s: %w",
			u.cfg.Name, d, u.cat.opts.ConnectTimeout, u.strays.since(strays), err)
	}
	return c, u.redact(err)
}

// dial connects, negotiates the protocol version and lists the tools. It
// reports relisten when a streamable HTTP server turned out to need the GET
// stream (a version before 2026-07-28); the caller then dials again with
// listen.
func (u *upstream) dial(ctx context.Context, listen bool) (_ *conn, relisten bool, _ error) {
	t, proc, err := u.newTransport(u.cfg, listen)
	if err != nil {
		return nil, false, err
	}
	calls := &inflight{}
	cli := client.NewClient(t, client.WithElicitationHandler(elicitor{u: u, calls: calls}),
		client.WithClientCapabilities(elicitationCapability()))
	// The connection's own context outlives this attempt: it bounds the
	// stdio process and the HTTP streams, and ends only in close.
	life, cancel := context.WithCancel(context.Background())
	c := newConn(cli, proc, cancel, calls)
	cli.OnNotification(func(n mcp.JSONRPCNotification) {
		if c.watches.handle(u.cfg.Name, u.log, u.cat.mask.Load(), n) {
			return
		}
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case c.kick <- struct{}{}:
			default: // a refresh is already pending; it will see this change too
			}
		}
	})
	cli.OnConnectionLost(func(err error) { c.markDead(fmt.Errorf("stream lost: %w", err)) })
	fail := func(what string, err error) (*conn, bool, error) {
		c.close()
		if errors.Is(err, transport.ErrAuthorizationRequired) {
			return nil, false, fmt.Errorf("%s: %w (%s)", what, err, unauthorizedHint(u.cfg))
		}
		if errors.Is(err, transport.ErrLegacySSEServer) {
			// mcp-go's guess covers any 4xx, a wrong path's 404 too.
			return nil, false, fmt.Errorf(`%s: %w (check the path of its url; a server of the older HTTP+SSE transport needs transport = "sse")`, what, err)
		}
		if proc != nil {
			if line := proc.stderr.lastLine(); line != "" {
				return nil, false, fmt.Errorf("%s: %w (server's last stderr line: %q)", what, err, line)
			}
		}
		return nil, false, fmt.Errorf("%s: %w", what, err)
	}

	if err := cli.Start(life); err != nil {
		return fail("start", err)
	}
	if pid := pidOf(c); pid > 0 {
		if stop, err := watchExit(pid, func() { c.markDead(fmt.Errorf("server process %d exited", pid)) }); err == nil {
			c.stops = append(c.stops, stop)
		} else {
			u.log.Debug("cannot watch the server process; a crash is noticed on the next call", "error", err)
		}
	}
	init, err := cli.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "cexec", Version: version.Version},
	}})
	if err != nil {
		return fail("initialize", err)
	}
	c.protocol, c.info = cli.ProtocolVersion(), init.ServerInfo
	listChanged := init.Capabilities.Tools != nil && init.Capabilities.Tools.ListChanged
	modern := mcp.IsModernProtocol(c.protocol)
	// Before 2026-07-28 a streamable HTTP server sends on the GET stream
	// what relates to no request of cexec's: tool list changes, and the
	// requests (elicitation) that some servers send there even during a
	// call. cexec declares elicitation, so it listens to every such server.
	if !modern && !listen && u.cfg.Transport == config.TransportHTTP {
		c.close()
		return nil, true, nil
	}
	if listChanged && modern {
		stop, err := cli.ListenAsync(life, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) {
			u.log.Warn("subscriptions/listen stream ended; tool list changes are not followed until reconnect", "error", err)
		})
		if err != nil {
			return fail("subscribe to tool list changes", err)
		}
		c.stops = append(c.stops, stop)
	}
	if err := u.list(ctx, c); err != nil {
		return fail("list tools", err)
	}
	// Counted in the catalog's WaitGroup (run, which is counted, is still
	// going), so Close waits for a refresh in progress.
	u.cat.wg.Add(1)
	go func() {
		defer u.cat.wg.Done()
		u.follow(life, c)
	}()
	return c, false, nil
}

// follow refreshes the tool list whenever the server says it changed.
func (u *upstream) follow(life context.Context, c *conn) {
	for {
		select {
		case <-c.kick:
		case <-c.dead:
			return
		case <-life.Done():
			return
		}
		u.mu.Lock()
		u.listChanged++
		u.mu.Unlock()
		ctx, cancel := context.WithTimeout(life, callTimeout(u.cfg))
		err := u.list(ctx, c)
		cancel()
		if err != nil && !c.isDead() {
			u.log.Warn("refresh after tools/list_changed failed", "error", u.redact(err))
			if isConnError(err) {
				c.markDead(err)
			}
		}
	}
}

// list fetches the server's tools over c and installs them in the catalog.
func (u *upstream) list(ctx context.Context, c *conn) error {
	u.refreshMu.Lock()
	defer u.refreshMu.Unlock()
	rctx, sink := withRawSink(ctx)
	res, err := c.client.ListTools(rctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	accept := make(map[string]bool, len(res.Tools))
	for _, t := range res.Tools {
		accept[t.Name] = true
	}
	sink.mu.Lock()
	pages := sink.pages
	sink.mu.Unlock()
	// Descriptions and schemas become the stubs programs read.
	mask := u.cat.mask.Load()
	for i := range pages {
		pages[i] = mask.raw(pages[i])
	}
	tools, err := parseTools(u.cfg.Name, pages, accept)
	if err != nil {
		return err
	}
	u.cat.replaceTools(u.cfg.Name, tools)
	return nil
}

// ready returns the live connection, waiting while one is being made;
// while the server is in backoff after a failed attempt it fails at once,
// unless retryForCall starts an attempt for it.
func (u *upstream) ready(ctx context.Context) (*conn, error) {
	for {
		u.mu.Lock()
		st, c, wake, lastErr := u.state, u.conn, u.wake, u.lastErr
		u.mu.Unlock()
		switch {
		case st == StateReady && !c.isDead():
			return c, nil
		case st == StateReady:
			// Lost a moment ago (a call saw it first); the supervisor is
			// about to reconnect, so wait like for a reconnect.
			st = StateReconnecting
		case st == StateBackoff:
			var signIn signInRequired
			if errors.As(lastErr, &signIn) {
				// Its own words say what to do; the transport's layers add nothing.
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, signIn)
			}
			if u.retryForCall() {
				continue
			}
			return nil, fmt.Errorf("%w: server %s: %w", ErrUnavailable, u.cfg.Name, lastErr)
		case st == StateClosed:
			return nil, fmt.Errorf("%w: server %s: catalog closed", ErrUnavailable, u.cfg.Name)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: server %s is %s: %w", ErrUnavailable, u.cfg.Name, st, ctx.Err())
		}
	}
}

func (u *upstream) status() ServerStatus {
	if u.tenants != nil {
		return u.scopedStatus()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	s := ServerStatus{
		Scope:           config.ScopeShared,
		Name:            u.cfg.Name,
		Transport:       u.cfg.Transport,
		Optional:        u.cfg.Optional,
		State:           u.state,
		ProtocolVersion: u.protocol,
		ServerName:      u.info.Name,
		ServerVersion:   u.info.Version,
		Restarts:        u.restarts,
		ListChanged:     u.listChanged,
		ConnectedAt:     u.connectedAt,
	}
	if u.lastErr != nil {
		s.LastError = u.lastErr.Error()
	}
	s.StrayLines, s.LastStrayLine, s.lastStrayAt = u.strays.status()
	if u.conn != nil && !u.conn.isDead() {
		s.PID = pidOf(u.conn)
	}
	return s
}

// scopedStatus sums up a tenant-scoped server: what its instances last
// reported of the server, and each instance. Its State is the discovery
// instance's until the catalog's serverStatus knows the tools.
func (u *upstream) scopedStatus() ServerStatus {
	s := ServerStatus{Name: u.cfg.Name, Transport: u.cfg.Transport, Optional: u.cfg.Optional, Scope: config.ScopeTenant, State: StateConnecting}
	s.Instances = u.tenants.status()
	var latest time.Time
	for _, in := range s.Instances {
		s.Restarts += in.Restarts
		if in.Tenant == endpoint.DefaultTenant {
			s.State, s.LastError = in.State, in.LastError
		}
		s.StrayLines += in.StrayLines
		if in.lastStrayAt.After(s.lastStrayAt) {
			s.LastStrayLine, s.lastStrayAt = in.LastStrayLine, in.lastStrayAt
		}
		if in.ConnectedAt.After(latest) {
			latest = in.ConnectedAt
			s.ProtocolVersion, s.ServerName, s.ServerVersion, s.ConnectedAt = in.ProtocolVersion, in.ServerName, in.ServerVersion, in.ConnectedAt
		}
	}
	return s
}

// maxProbe bounds the request that tells a slow tool from a wedged server.
const maxProbe = 10 * time.Second

// probe asks the server for its tools after a call to it timed out, in the
// background: a server that answers nothing within its timeout (at most
// maxProbe) is wedged, not slow, and is restarted rather than left to time
// out every call. Not a ping: protocol 2026-07-28 removed it, and mcp-go's
// Ping then succeeds without asking. One probe runs per connection at a
// time.
func (u *upstream) probe(c *conn) {
	if c.isDead() || !c.probing.CompareAndSwap(false, true) {
		return
	}
	u.cat.wg.Add(1)
	go func() {
		defer u.cat.wg.Done()
		defer c.probing.Store(false)
		d := min(callTimeout(u.cfg), maxProbe)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		stop := context.AfterFunc(u.cat.life, cancel)
		defer stop()
		_, err := c.client.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil && !c.isDead() && u.cat.life.Err() == nil {
			u.log.Warn("server answers nothing after a call timed out; restarting it", "error", u.redact(err))
			c.markDead(fmt.Errorf("server did not answer tools/list within %s after a call timed out: %w", d, err))
		}
	}()
}

// isConnError reports whether err is a failure of the connection itself
// rather than an answer from the server.
func isConnError(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) || errors.Is(err, transport.ErrTransportClosed)
}

// unauthorizedHint says what to configure for a server that answered 401.
// With an oauth block cexec's own client answers a 401 (a sign-in), so
// this is a server whose block gives no or the wrong credentials.
func unauthorizedHint(s *config.MCPServer) string {
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			return fmt.Sprintf("server %s answered 401 Unauthorized: it refused the Authorization header of its mcp_server block; check the token", s.Name)
		}
	}
	return fmt.Sprintf(`server %s answered 401 Unauthorized: it needs credentials: headers = { Authorization = "Bearer ${env("TOKEN")}" } in its mcp_server block, or an oauth {} block to sign in`, s.Name)
}
