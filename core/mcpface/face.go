package mcpface

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/telemetry"
	"github.com/cexec/cexec/internal/hclogslog"
)

// Defaults of Options.
const (
	DefaultTenant      = endpoint.DefaultTenant
	DefaultMaxOutput   = 16 << 10
	DefaultSearchLimit = 8
	MaxSearchLimit     = 50
	DefaultIdleTTL     = time.Hour
)

// protocolVersions are the MCP revisions the face serves. 2026-07-28 is left
// out on purpose: it removed sessions, and a cexec session (its log, its PII
// tokens) is the MCP session. Clients of that revision negotiate down.
var protocolVersions = []string{
	mcp.ProtocolVersion20251125,
	mcp.ProtocolVersion20250618,
	mcp.ProtocolVersion20250326,
	mcp.ProtocolVersion20241105,
}

// Options are the face's services and transport settings.
type Options struct {
	Catalog  Catalog
	Searcher Searcher
	Executor Executor
	// Tasks, when set, adds execute_task; set it when a code generator is
	// configured.
	Tasks TaskRunner
	// Calls, when set, adds call_tool.
	Calls ToolCaller
	// Workflows, when set, adds the workflow tool.
	Workflows Workflows
	State     StateStore
	Skills    SkillStore
	// Attachments, when set, serves saved attachments as
	// cexec://workspace/<path> resources.
	Attachments AttachmentStore
	// PII tokenizes everything that leaves through the face.
	PII Tokenizer

	// Tokens map bearer tokens to tenants. Without tokens, TCP is only
	// served on loopback addresses, as DefaultTenant.
	Tokens []Token
	// OAuth, when set, also accepts the JWT access tokens of an identity
	// provider (see OAuth); it counts as auth for non-loopback listeners.
	OAuth *OAuth
	// AllowedOrigins are the browser origins (scheme://host[:port])
	// allowed; requests without an Origin header are not browsers'.
	AllowedOrigins []string
	// SSE also serves the HTTP+SSE transport of protocol 2024-11-05.
	SSE bool
	// ReadHeaderTimeout closes a connection that sent no complete request
	// header in time; ReadTimeout bounds reading a whole request, body
	// included; IdleTimeout closes a keep-alive connection between
	// requests. None of them ends a running call or an open GET or SSE
	// stream. Defaults: config.DefaultMCP*.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// MaxConnections and MaxConnectionsPerPeer cap a TCP listener's open
	// connections, overall and per peer IP; defaults 1024 and 64.
	MaxConnections        int
	MaxConnectionsPerPeer int
	// MaxRequestBody caps a request body in bytes; default 4 MiB.
	MaxRequestBody int64
	// MaxSessionsPerTenant caps one tenant's live MCP sessions; default 64.
	MaxSessionsPerTenant int
	// MaxTasksPerTenant caps the execute_code tasks one tenant has kept
	// (until each one's ttl passes); default DefaultMaxTasksPerTenant.
	MaxTasksPerTenant int
	// DefaultTenant is the tenant of unix socket requests without the
	// tenant header and of TCP requests when no tokens are configured;
	// default "default".
	DefaultTenant string
	// SessionIdleTTL ends streamable HTTP sessions idle for this long;
	// default one hour.
	SessionIdleTTL time.Duration
	// OnSessionEnd, if set, is called when an MCP session ends (DELETE, idle
	// timeout, SSE stream closed, shutdown), e.g. to drop the session's
	// persistent interpreter.
	OnSessionEnd func(Scope)
	// Replica, when set, prefixes session ids ("a.<id>"): the hint a proxy
	// that cannot learn the Mcp-Session-Id header routes on. Leases, when
	// set, records which replica serves each session, so a request routed
	// to the wrong live replica gets 421 and one whose replica died 404
	// (the client initializes a new session).
	Replica string
	Leases  SessionLeases
	// OnSessionStart, if set, is called when an MCP session opens, with
	// how its opening request authenticated (AuthSocket, AuthLoopback,
	// AuthToken, AuthOAuth): a sign-in, for the audit log.
	OnSessionStart func(sc Scope, auth string)

	// MaxOutput caps the stdout returned by execute_code in bytes (stderr
	// and tracebacks get a quarter of it); default 16 KiB.
	MaxOutput int
	// SearchLimit is search_tools' default limit; default 8.
	SearchLimit int
	// Version is reported to clients in serverInfo.
	Version string
	Logger  hclog.Logger
}

// ApplyConfig sets the transport options from cexec.hcl's mcp block. The
// block's listen address is for the caller: see ListenTCP.
func (o *Options) ApplyConfig(m config.MCP) {
	o.AllowedOrigins = slices.Clone(m.AllowedOrigins)
	o.SSE = m.SSE
	o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = m.ReadHeaderTimeout, m.ReadTimeout, m.IdleTimeout
	o.MaxConnections, o.MaxConnectionsPerPeer = m.MaxConnections, m.MaxConnectionsPerPeer
	o.MaxRequestBody = m.MaxRequestBody
	o.MaxSessionsPerTenant = m.MaxSessionsPerTenant
	o.SessionIdleTTL = m.SessionIdleTimeout
	o.Tokens = nil
	for _, t := range m.Tokens {
		o.Tokens = append(o.Tokens, Token{Token: t.Token, Tenant: t.Tenant})
	}
	o.OAuth = nil
	if a := m.OAuth; a != nil {
		o.OAuth = &OAuth{Issuer: a.Issuer, JWKSURL: a.JWKSURL, Audience: a.Audience, TenantClaim: a.TenantClaim, RequiredScopes: slices.Clone(a.RequiredScopes)}
	}
}

var tenantRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Face is cexecd's MCP server.
type Face struct {
	o        Options
	log      hclog.Logger
	srv      *server.MCPServer
	http     *server.StreamableHTTPServer
	sse      *server.SSEServer
	sessions *sessionTable
	streams  *sseStreams
	tasks    *taskRuns
	readers  []resourceReader
	tokens   []tokenEntry
	oauth    *resourceServer // nil without Options.OAuth
	origins  map[string]bool
	hosts    map[string]bool
	handler  http.Handler
}

// New checks o and builds the face. Serve it with Serve (or mount Handler
// on an http.Server).
func New(o Options) (*Face, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	f := &Face{o: o, log: o.Logger, origins: map[string]bool{}, hosts: map[string]bool{}}
	if err := f.setAccess(o.Tokens, o.AllowedOrigins); err != nil {
		return nil, err
	}
	if o.OAuth != nil {
		rs, err := newResourceServer(*o.OAuth, o.Logger)
		if err != nil {
			return nil, err
		}
		f.oauth = rs
	}
	f.tasks = newTaskRuns()
	end := o.OnSessionEnd
	o.OnSessionEnd = func(sc Scope) {
		f.tasks.endSession(sc.Session)
		if end != nil {
			end(sc)
		}
	}
	f.sessions = newSessionTable(o)
	f.streams = newSSEStreams(o.SessionIdleTTL)
	f.srv = f.newMCPServer()
	if err := f.addTools(); err != nil {
		return nil, err
	}
	f.addResources()
	f.handler = f.admit(f.routes())
	if f.oauth != nil {
		admitted := f.handler
		f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !f.oauth.serveMetadata(w, r) {
				admitted.ServeHTTP(w, r)
			}
		})
	}
	return f, nil
}

// Close releases what New started beyond serving: the refreshing of the
// identity provider's keys. Call it after the listeners stopped.
func (f *Face) Close() {
	if f.oauth != nil {
		f.oauth.close()
	}
}

// hasAuth reports whether TCP requests are authenticated: static tokens or
// an identity provider's.
func (f *Face) hasAuth() bool { return len(f.tokens) > 0 || f.oauth != nil }

// check fails on missing services or an invalid default tenant and fills
// in the defaults.
func (o *Options) check() error {
	var missing []string
	for name, ok := range map[string]bool{
		"Catalog": o.Catalog != nil, "Searcher": o.Searcher != nil, "Executor": o.Executor != nil,
		"State": o.State != nil, "Skills": o.Skills != nil, "PII": o.PII != nil,
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("mcp face: missing %s", strings.Join(sortedStrings(missing), ", "))
	}
	if o.DefaultTenant == "" {
		o.DefaultTenant = DefaultTenant
	}
	if !tenantRE.MatchString(o.DefaultTenant) {
		return fmt.Errorf("mcp face: invalid default tenant %q", o.DefaultTenant)
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.SearchLimit <= 0 {
		o.SearchLimit = DefaultSearchLimit
	}
	o.SearchLimit = min(o.SearchLimit, MaxSearchLimit)
	if o.SessionIdleTTL <= 0 {
		o.SessionIdleTTL = DefaultIdleTTL
	}
	o.fillLimits()
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return nil
}

func (o *Options) fillLimits() {
	orDefault(&o.ReadHeaderTimeout, config.DefaultMCPReadHeaderTimeout)
	orDefault(&o.ReadTimeout, config.DefaultMCPReadTimeout)
	orDefault(&o.IdleTimeout, config.DefaultMCPIdleTimeout)
	orDefault(&o.MaxConnections, config.DefaultMCPMaxConnections)
	orDefault(&o.MaxConnectionsPerPeer, config.DefaultMCPMaxConnectionsPerPeer)
	orDefault(&o.MaxRequestBody, config.DefaultMCPMaxRequestBody)
	orDefault(&o.MaxSessionsPerTenant, config.DefaultMCPMaxSessionsPerTenant)
	orDefault(&o.MaxTasksPerTenant, DefaultMaxTasksPerTenant)
}

func orDefault[T time.Duration | int | int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// setAccess records the bearer tokens (hashed) with their tenants and the
// allowed origins with their hosts.
func (f *Face) setAccess(tokens []Token, origins []string) error {
	seen := map[[sha256.Size]byte]bool{}
	for i, t := range tokens {
		if t.Token == "" {
			return fmt.Errorf("mcp face: token %d is empty", i+1)
		}
		if !tenantRE.MatchString(t.Tenant) {
			return fmt.Errorf("mcp face: token %d: invalid tenant %q", i+1, t.Tenant)
		}
		sum := sha256.Sum256([]byte(t.Token))
		if seen[sum] {
			return fmt.Errorf("mcp face: token %d is a duplicate; each token maps to one tenant", i+1)
		}
		seen[sum] = true
		f.tokens = append(f.tokens, tokenEntry{sum: sum, tenant: t.Tenant})
	}
	for _, s := range origins {
		norm, err := normalizeOrigin(s)
		if err != nil {
			return fmt.Errorf("mcp face: %w", err)
		}
		f.origins[norm] = true
		if u, err := url.Parse(norm); err == nil {
			f.hosts[u.Hostname()] = true
		}
	}
	return nil
}

// newMCPServer is the MCP server the face's transports share.
func (f *Face) newMCPServer() *server.MCPServer {
	hooks := &server.Hooks{}
	hooks.AddAfterListResources(f.listResources)
	hooks.AddBeforeReadResource(f.steerNotFound)
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) {
		// Streamable sessions outlive their GET streams; only an SSE
		// session ends with its stream (and may be resumed: sseresume.go).
		f.sessions.end(s.SessionID(), kindSSE)
		f.streams.closed(s.SessionID())
	})
	hooks.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) {
		// A resumed SSE session was initialized on its earlier stream.
		if f.streams.wasResumed(s.SessionID()) {
			s.Initialize()
		}
	})
	taskHooks := &server.TaskHooks{}
	f.tasks.hook(hooks, taskHooks)
	hooks.AddOnRequestInitialization(f.admitTask)
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
		if s := server.ClientSessionFromContext(ctx); s != nil && s.SessionID() != "" {
			tenant, _ := tenantFrom(ctx)
			res.Instructions += sessionInstructions(tenant, s.SessionID())
		}
	})
	return server.NewMCPServer("cexec", f.o.Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, true),
		server.WithInstructions(instructions),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithHooks(hooks),
		// execute_code may run as a task (tasks.go): listed, cancellable.
		server.WithTaskCapabilities(true, true, true),
		server.WithTaskHooks(taskHooks),
	)
}

// routes serves streamable HTTP and, with Options.SSE, the legacy SSE
// transport.
func (f *Face) routes() *http.ServeMux {
	f.http = server.NewStreamableHTTPServer(f.srv,
		server.WithSessionIdManagerResolver(f.sessions),
		server.WithSessionIdleTTL(f.o.SessionIdleTTL),
		server.WithStreamableHTTPProtocolVersions(protocolVersions...),
		// admit does the DNS rebinding checks, with the allow list.
		server.WithDisableLocalhostProtection(true),
		server.WithHeartbeatInterval(30*time.Second),
		server.WithStreamableHTTPLogger(hclogslog.New(f.log.Named("transport"))),
	)
	mux := http.NewServeMux()
	mux.Handle(endpoint.MCPPath, f.answerFirst(f.http, replyJSON, f.forbiddenTaskCall))
	if f.o.SSE {
		f.sse = server.NewSSEServer(f.srv,
			server.WithSSEEndpoint(endpoint.SSEPath),
			server.WithMessageEndpoint(endpoint.MessagePath),
			server.WithSSEDisableLocalhostProtection(true),
			server.WithKeepAlive(true),
			// mcp-go restricts revisions per transport for streamable HTTP
			// only; without this, server/discover over SSE offers 2026-07-28
			// and a client takes it instead of initialize.
			server.WithSSEContextFunc(func(ctx context.Context, _ *http.Request) context.Context {
				return server.WithSupportedProtocolVersions(ctx, protocolVersions)
			}),
			server.WithSessionIDGenerator(func(ctx context.Context, r *http.Request) (string, error) {
				tenant, _ := tenantFrom(ctx)
				id, _ := f.streams.open(tenant, authFrom(ctx), r.Header.Get("Last-Event-ID"), f.sessions.newSessionID)
				f.sessions.add(id, tenant, kindSSE, "")
				f.sessions.started(id, tenant, authFrom(ctx))
				setSSEID(ctx, id)
				return id, nil
			}),
		)
		mux.Handle(endpoint.SSEPath, withEventID(f.sse))
		mux.Handle(endpoint.MessagePath, f.answerFirst(f.sse, f.replySSE, f.forbiddenTaskCall, unservedRevision))
	}
	return mux
}

// instructions is the server's description of itself in initialize, for
// clients that show it to the model. The tool descriptions teach the
// workflow; this says only what they do not.
const instructions = "cexec: upstream MCP tools as Python functions in a sandbox without network access. " +
	"One program does the work of many tool calls; only what it prints reaches you."

// sessionInstructions names the connection's session once, where the
// model reads it before any call: it cannot learn it otherwise (results
// name a session only when the session argument changed it), and needs it
// to continue the session from another connection or point a person to
// its log.
func sessionInstructions(tenant, id string) string {
	show := "cexecctl sessions show " + id
	if tenant != "" && tenant != endpoint.DefaultTenant {
		show = "cexecctl --tenant " + tenant + " sessions show " + id
	}
	return " This connection's session (execute_code's default) is " + id + "; `" + show + "` shows its log."
}

// NotifyResourcesChanged tells connected clients that the stub tree or the
// skills changed (resources/list_changed); call it when the catalog
// regenerates stubs.
func (f *Face) NotifyResourcesChanged() {
	f.srv.SendNotificationToAllClients(string(mcp.MethodNotificationResourcesListChanged), nil)
}

// Sessions counts the live MCP sessions.
func (f *Face) Sessions() int { return f.sessions.len() }

// SessionsByTenant returns the live sessions per tenant (for metrics).
func (f *Face) SessionsByTenant() map[string]int { return f.sessions.byTenant() }

// scope is the default scope of a call: the transport's tenant and the MCP
// session.
func (f *Face) scope(ctx context.Context) (Scope, error) {
	tenant, ok := tenantFrom(ctx)
	if !ok {
		return Scope{}, errors.New("no tenant: the request did not come through the face's HTTP handler")
	}
	s := server.ClientSessionFromContext(ctx)
	if s == nil || s.SessionID() == "" {
		return Scope{}, errors.New("no MCP session: initialize a session first")
	}
	return Scope{Tenant: tenant, Session: s.SessionID()}, nil
}

// reply is what a tool handler produces; the face tokenizes it before it
// leaves.
type reply struct {
	text       string
	structured any
	isError    bool
	// tokenized says every text in the reply is in its model-facing form
	// already (see Execution.Tokenized), so it is returned as it is.
	tokenized bool
	// attachments follow the text as further content items.
	attachments []Attachment
}

func textReply(format string, args ...any) reply {
	return reply{text: fmt.Sprintf(format, args...)}
}

func errorReply(format string, args ...any) reply {
	return reply{text: fmt.Sprintf(format, args...), isError: true}
}

// toolFunc handles one tool call. It may change the scope (execute_code's
// session argument); the reply is tokenized for the scope as it is after
// the call.
type toolFunc func(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply

// wrap turns a toolFunc into an mcp-go handler that resolves the scope and
// passes the reply through the PII tokenizer. Failures are isError results,
// never protocol errors, so the agent can read and act on them.
func (f *Face) wrap(name string, fn toolFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sc, err := f.scope(ctx)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		telemetry.SetScope(ctx, sc.Tenant, sc.Session)
		if req.Params.Task != nil {
			var done func()
			ctx, done = f.tasks.start(ctx, req, sc.Session)
			defer done()
		}
		ctx = f.withAsker(ctx)
		r := fn(ctx, &sc, req)
		text, structured, err := f.tokenizeReply(ctx, sc, r)
		if err != nil {
			return f.withheld(ctx, name, sc, err), nil
		}
		atts := r.attachments
		if !r.tokenized && len(atts) > 0 {
			if atts, err = f.tokenizeAttachments(ctx, sc, atts); err != nil {
				return f.withheld(ctx, name, sc, err), nil
			}
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: r.isError}
		for i := range atts {
			res.Content = append(res.Content, atts[i].content(i))
		}
		if structured != nil {
			res.StructuredContent = structured
		}
		return res, nil
	}
}

// withheld is the result of a tool call whose reply the tokenizer did not
// pass, so none of it is returned.
func (f *Face) withheld(ctx context.Context, tool string, sc Scope, err error) *mcp.CallToolResult {
	if f.tokenizerFailed(ctx, "output", err, "tool", tool, "tenant", sc.Tenant, "session", sc.Session) {
		return mcp.NewToolResultError("cexec withheld this output because the PII tokenizer failed; try again, and tell the operator if it persists")
	}
	return mcp.NewToolResultError(tool + ": cancelled")
}

// tokenizerFailed logs that the tokenizer could not pass what (the output,
// a resource), which is then withheld, and reports whether it failed. A
// cancelled request ends the tokenizer's call too, but that is no failure
// of it, and no one waits for the answer: it is noted at debug level.
func (f *Face) tokenizerFailed(ctx context.Context, what string, err error, args ...any) bool {
	if ctx.Err() != nil {
		f.log.Debug("request cancelled; its "+what+" was not tokenized", args...)
		return false
	}
	f.log.Error("pii tokenizer failed; "+what+" withheld", append(args, "error", err)...)
	return true
}

// tokenizeReply tokenizes a reply's text and structured result, in one
// pass when the Tokenizer can.
func (f *Face) tokenizeReply(ctx context.Context, sc Scope, r reply) (string, json.RawMessage, error) {
	if r.tokenized {
		if r.structured == nil {
			return r.text, nil, nil
		}
		raw, err := json.Marshal(r.structured)
		return r.text, raw, err
	}
	if r.structured == nil {
		text, err := f.o.PII.Tokenize(ctx, sc, r.text)
		return text, nil, err
	}
	raw, session, err := structuredJSON(r.structured)
	if err != nil {
		return "", nil, err
	}
	var text string
	if both, ok := f.o.PII.(ReplyTokenizer); ok {
		text, raw, err = both.TokenizeReply(ctx, sc, r.text, raw)
	} else if text, err = f.o.PII.Tokenize(ctx, sc, r.text); err == nil {
		raw, err = f.o.PII.TokenizeJSON(ctx, sc, raw)
	}
	if err != nil {
		return "", nil, err
	}
	if raw, err = restoreSession(raw, r.structured, session); err != nil {
		return "", nil, err
	}
	return text, raw, nil
}

// structuredJSON marshals a structured result for tokenizing. The session
// id of an execution is an identifier the agent passes back, not data: a
// detector may take its random part for a secret, so it is left out (and
// returned, for restoreSession to put back).
func structuredJSON(v any) (json.RawMessage, string, error) {
	out, isExec := v.(ExecOutput)
	session := out.Session
	if isExec {
		out.Session = ""
		v = out
	}
	raw, err := json.Marshal(v)
	return raw, session, err
}

// restoreSession puts an execution's session id back into its tokenized
// structured result.
func restoreSession(raw json.RawMessage, v any, session string) (json.RawMessage, error) {
	var out ExecOutput
	if _, isExec := v.(ExecOutput); !isExec {
		return raw, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	out.Session = session
	return json.Marshal(out)
}
