package config

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/childenv"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// Pipeline is the `pipeline { ... }` block: which plugins execute_task uses.
type Pipeline struct {
	// Selector names the selector plugin; it defaults to the only one
	// configured.
	Selector string
	// Codegen is the generator chain, tried in order; it defaults to every
	// codegen plugin in file order.
	Codegen []string
	// Guards run on code, tool calls and output; they default to every guard
	// plugin in file order.
	Guards []string
	// MaxRepairs is how many times a failed program is regenerated.
	MaxRepairs int
	// SearchLimit is how many tools the selector returns to the generator.
	SearchLimit int
	// MaxInlineAttachment is the largest item a program shows (cexec.show)
	// that is returned inline to the agent; larger ones are saved in the
	// tenant's workspace and returned as resource links.
	MaxInlineAttachment int64
}

// DefaultMaxInlineAttachment is pipeline.max_inline_attachment's default.
const DefaultMaxInlineAttachment = 1 << 20

// Sandbox is the `sandbox { ... }` block.
type Sandbox struct {
	// Backend names the sandbox plugin; it defaults to the only one
	// configured.
	Backend string
	// Network allows sandboxed code to reach the network.
	Network bool
	// SessionInterpreter runs a session's executions in one warm
	// interpreter of its own, each in new globals, instead of a forked
	// process each (sandbox.ExecRequest.FreshGlobals).
	SessionInterpreter bool
	Pool               Pool
	Limits             Limits
}

// Pool sizes the warm sandbox pool (per tenant).
type Pool struct {
	Warm        int
	MaxTotal    int
	IdleTimeout time.Duration
	MaxUses     int
	// QueueTimeout bounds an execution's wait for a sandbox when all
	// max_total are busy.
	QueueTimeout time.Duration
}

// MaxExecutionTimeout is the longest an execution may run, by the config or
// a request: the sandbox runtime waits in int milliseconds (under 25
// days), and a longer run is a typo more often than not.
const MaxExecutionTimeout = 24 * time.Hour

// Limits bound one execution. Sizes are bytes.
type Limits struct {
	Memory  int64
	PIDs    int
	Timeout time.Duration
	Output  int64
	Tmp     int64
	// Shm is the size of a sandbox's /dev/shm.
	Shm int64
	// MaxFileSize is the largest file a program may write (RLIMIT_FSIZE):
	// a write past it fails with EFBIG.
	MaxFileSize int64
	// MaxArgumentSize and MaxResultSize cap one tool call's arguments and
	// result, so that one program cannot crash an upstream other tenants
	// share; an mcp_server may set its own.
	MaxArgumentSize int64
	MaxResultSize   int64
}

// Transports of an upstream MCP server.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
	// TransportBuiltin is a server built into cexecd, served in process;
	// the block's name says which (BuiltinServers).
	TransportBuiltin = "builtin"
)

// BuiltinServers are the names of the servers built into cexecd, which an
// `mcp_server "<name>" { transport = "builtin" }` block enables.
var BuiltinServers = []string{"forms"}

// MCPServer is one `mcp_server "<name>" { ... }` block: an upstream MCP
// server reached over stdio (Command) or HTTP/SSE (URL).
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	// Env is the child's whole environment; it does not inherit cexecd's.
	Env map[string]string
	// Cwd is the child's working directory (absolute), or "".
	Cwd string
	URL string
	// URLSensitive: the url has an env() value in it, so errors and logs
	// show it masked.
	URLSensitive bool
	Transport    string
	Headers      map[string]string
	// Optional servers may fail to connect with only a warning.
	Optional bool
	// Timeout bounds each call to the server.
	Timeout time.Duration
	// MaxArgumentSize and MaxResultSize override sandbox.limits' caps of
	// one tool call for this server; 0 keeps them.
	MaxArgumentSize int64
	MaxResultSize   int64
	// Scope is ScopeShared (one instance for every tenant) or ScopeTenant
	// (one instance or session per tenant, see ServerForTenant).
	Scope string
	// IdleTimeout stops a tenant's instance unused for this long
	// (ScopeTenant only).
	IdleTimeout time.Duration
	// MaxInstances caps the running instances of a ScopeTenant server.
	MaxInstances int
	// OAuth signs requests to an http or sse server with OAuth 2.1 access
	// tokens; nil for servers without the oauth block.
	OAuth     *OAuth
	DeclRange hcl.Range

	// perTenant keeps the expressions that may name the tenant, so that
	// each tenant's instance gets them evaluated with its own values.
	perTenant *tenantExprs
}

// Tenant is one `tenant "<id>" { ... }` block.
type Tenant struct {
	ID string
	// DiskQuota bounds everything the tenant stores (workspace, state,
	// skills, session logs, PII vaults) in bytes; 0 means the cexec
	// block's disk_quota.
	DiskQuota int64
	// MaxFiles bounds the tenant's files and folders; 0 means the cexec
	// block's max_files.
	MaxFiles int
	// MaxConcurrent bounds simultaneous executions; 0 means unlimited.
	MaxConcurrent int
	// MaxSessionLog bounds one session's log in bytes; 0 means the
	// workspace default.
	MaxSessionLog int64
	// SessionTTL is how long a session (log, checkpoints, PII vault)
	// outlives its last entry; 0 means the workspace default.
	SessionTTL time.Duration
	// AllowedServers lists the upstream servers the tenant may call; nil
	// means all of them.
	AllowedServers []string
	// Policy is the undecoded body of the tenant's policy block, or nil.
	Policy      hcl.Body
	PolicyRange hcl.Range
	// Servers holds the tenant's own env and headers for tenant-scoped
	// servers, by server name; they are merged over the server's.
	Servers   map[string]*ServerOverride
	DeclRange hcl.Range
}

func (d *decoder) pipeline(cfg *Config, raw *rawPipeline) {
	pl := &cfg.Pipeline
	pl.MaxRepairs, pl.SearchLimit, pl.MaxInlineAttachment = 2, 8, DefaultMaxInlineAttachment
	var selector, codegen, guards *hcl.Attribute
	var block *hcl.Range
	if raw != nil {
		selector, codegen, guards, block = raw.Selector, raw.Codegen, raw.Guards, raw.DeclRange.Ptr()
		if n, ok := d.integer(raw.MaxRepairs, path("pipeline", "max_repairs"), 0); ok {
			pl.MaxRepairs = n
		}
		if n, ok := d.integer(raw.SearchLimit, path("pipeline", "search_limit"), 1); ok {
			pl.SearchLimit = n
		}
		if raw.MaxInlineAttachment != nil {
			if n, ok := d.size(raw.MaxInlineAttachment, path("pipeline", "max_inline_attachment")); ok {
				pl.MaxInlineAttachment = n
			}
		}
	}

	if s, _, ok := d.str(selector, path("pipeline", "selector")); ok {
		if d.checkRef(cfg, pluginapi.KindSelector, s, selector.Expr.Range()) {
			pl.Selector = s
		}
	} else if selector == nil {
		pl.Selector = d.onlyOne(cfg, pluginapi.KindSelector, "pipeline", "selector", block)
	}

	pl.Codegen = d.refList(cfg, pluginapi.KindCodegen, codegen, path("pipeline", "codegen"))
	pl.Guards = d.refList(cfg, pluginapi.KindGuard, guards, path("pipeline", "guards"))
	d.unlisted(cfg, pluginapi.KindGuard, guards, pl.Guards, "Guard plugin never called",
		"it never checks code or tool calls, and detects no PII")
	d.unlisted(cfg, pluginapi.KindCodegen, codegen, pl.Codegen, "Codegen plugin never called",
		"execute_task never asks it for a program")
	d.guardOptIn(cfg, guards, block)
}

// unlisted warns about each plugin of kind that an explicit pipeline list
// (attr) leaves out: cexecd starts it but never calls it, and a guard added
// to a file whose guards list names only "pii" would otherwise look active.
func (d *decoder) unlisted(cfg *Config, kind pluginapi.Kind, attr *hcl.Attribute, listed []string, summary, effect string) {
	if attr == nil {
		return
	}
	for _, p := range cfg.PluginsOfKind(kind) {
		if slices.Contains(listed, p.Name) {
			continue
		}
		d.warnf(p.DeclRange.Ptr(), summary, "plugin %q %q is started, but pipeline.%s (line %d) does not list it, so %s. Add %q to pipeline.%s, or remove this block.",
			kind, p.Name, attr.Name, attr.Range.Start.Line, effect, p.Name, attr.Name)
	}
}

// guardOptIn makes running code without a PII guard a choice written in the
// file: without one, everything a program prints reaches the model raw. A
// config with a sandbox plugin and no guard plugin is refused unless it says
// pipeline { guards = [] }, which is then a warning at every start. (Without
// a sandbox nothing runs, so nothing but what agents saved themselves can
// reach them.)
func (d *decoder) guardOptIn(cfg *Config, guards *hcl.Attribute, block *hcl.Range) {
	if len(cfg.PluginsOfKind(pluginapi.KindSandbox)) == 0 {
		return
	}
	if guards != nil {
		if l, ok := d.strList(guards, path("pipeline", "guards")); ok && len(l) == 0 {
			d.warnf(guards.Range.Ptr(), "PII guard off", "pipeline.guards = [] runs code without a PII guard: program output, errors, state and skills reach the model with raw emails, phone numbers, card numbers and secrets.")
		}
		return
	}
	if len(cfg.PluginsOfKind(pluginapi.KindGuard)) > 0 {
		return
	}
	if block == nil {
		block = &hcl.Range{Filename: cfg.Path, Start: hcl.InitialPos, End: hcl.InitialPos}
	}
	d.errorf(block, "No PII guard", `No guard plugin is configured, so program output would reach the model with raw PII. Add plugin "guard" "pii" {} (the local detector), or run without one explicitly with pipeline { guards = [] }.`)
}

// refList decodes a list of plugin names of one kind; absent, it is every
// configured plugin of that kind.
func (d *decoder) refList(cfg *Config, kind pluginapi.Kind, attr *hcl.Attribute, p []string) []string {
	if attr == nil {
		var names []string
		for _, pl := range cfg.PluginsOfKind(kind) {
			names = append(names, pl.Name)
		}
		return names
	}
	l, ok := d.strList(attr, p)
	if !ok {
		return nil
	}
	var names []string
	seen := map[string]int{}
	for i, name := range l {
		rng := elemRange(attr.Expr, i)
		// A plugin twice in the chain would run twice, and a second guard
		// pass or generator attempt is only a mistake.
		if first, dup := seen[name]; dup {
			d.errorf(rng.Ptr(), "Duplicate "+string(kind)+" plugin", "%q is already in %s at %s; list each plugin once.", name, attr.Name, elemRange(attr.Expr, first))
			continue
		}
		seen[name] = i
		if d.checkRef(cfg, kind, name, rng) {
			names = append(names, name)
		}
	}
	return names
}

// elemRange is the range of the i-th element of a list literal, or of the
// whole expression when it is not one.
func elemRange(expr hcl.Expression, i int) hcl.Range {
	if t, ok := expr.(*hclsyntax.TupleConsExpr); ok && i < len(t.Exprs) {
		return t.Exprs[i].Range()
	}
	return expr.Range()
}

func (d *decoder) checkRef(cfg *Config, kind pluginapi.Kind, name string, rng hcl.Range) bool {
	if cfg.Plugin(kind, name) != nil {
		return true
	}
	d.errorf(rng.Ptr(), "Unknown "+string(kind)+" plugin", "No plugin %q %q is configured%s.", kind, name, known(cfg, kind))
	return false
}

// known lists the configured plugins of a kind for "did you mean" details.
func known(cfg *Config, kind pluginapi.Kind) string {
	var names []string
	for _, p := range cfg.PluginsOfKind(kind) {
		names = append(names, strconv.Quote(p.Name))
	}
	if len(names) == 0 {
		return fmt.Sprintf("; add a plugin %q \"<name>\" block", kind)
	}
	return "; configured: " + strings.Join(names, ", ")
}

// onlyOne defaults a plugin reference to the single configured plugin of
// its kind, and asks the user to choose when there are several. The
// diagnostic points at the block that should choose (rng) or, when the file
// has none, at the second plugin of the kind: the one that made it ambiguous.
func (d *decoder) onlyOne(cfg *Config, kind pluginapi.Kind, block, attr string, rng *hcl.Range) string {
	ps := cfg.PluginsOfKind(kind)
	switch len(ps) {
	case 0:
		return ""
	case 1:
		return ps[0].Name
	}
	where := "in the " + block + " block"
	if rng == nil {
		rng = ps[1].DeclRange.Ptr()
		where = fmt.Sprintf("in a %s block (plugin %q %q is at %s)", block, kind, ps[0].Name, ps[0].DeclRange)
	}
	d.errorf(rng, "Ambiguous "+string(kind)+" plugin", "Several %s plugins are configured%s; choose one with %s %s.", kind, known(cfg, kind), attr, where)
	return ""
}

func (d *decoder) sandbox(cfg *Config, raw *rawSandbox, ov Overrides) {
	sb := &cfg.Sandbox
	// Every execution runs in a fresh child of the sandbox's zygote, so
	// max_uses only bounds what a sandbox itself accumulates (its /tmp);
	// a recycle costs a cold start and its warm-up, about 1 ms of CPU per
	// execution at 100 uses.
	sb.Pool = Pool{Warm: 2, MaxTotal: 16, IdleTimeout: 5 * time.Minute, MaxUses: 1000, QueueTimeout: 30 * time.Second}
	sb.Limits = Limits{Memory: 256 << 20, PIDs: 128, Timeout: 30 * time.Second, Output: 1 << 20, Tmp: 64 << 20, Shm: 64 << 20,
		MaxFileSize: DefaultMaxFileSize, MaxArgumentSize: 1 << 20, MaxResultSize: 16 << 20}

	var backend *hcl.Attribute
	var block *hcl.Range
	if raw != nil {
		backend, block = raw.Backend, raw.DeclRange.Ptr()
		if b, ok := d.boolean(raw.Network, path("sandbox", "network")); ok {
			sb.Network = b
		}
		if b, ok := d.boolean(raw.SessionInterpreter, path("sandbox", "session_interpreter")); ok {
			sb.SessionInterpreter = b
		}
		if raw.Pool != nil {
			d.pool(&sb.Pool, raw.Pool)
		}
		if raw.Limits != nil {
			d.limits(&sb.Limits, raw.Limits)
		}
	}

	if o, ok := pick(d.lookup, EnvSandboxBackend, ov.SandboxBackend); ok {
		if cfg.Plugin(pluginapi.KindSandbox, o.value) != nil {
			sb.Backend = o.value
		} else {
			d.errorf(nil, fmt.Sprintf("Unknown sandbox plugin %q from %s", o.value, o.source), "No plugin \"sandbox\" %q is configured%s.", o.value, known(cfg, pluginapi.KindSandbox))
		}
		return
	}
	if s, _, ok := d.str(backend, path("sandbox", "backend")); ok {
		if d.checkRef(cfg, pluginapi.KindSandbox, s, backend.Expr.Range()) {
			sb.Backend = s
		}
	} else if backend == nil {
		sb.Backend = d.onlyOne(cfg, pluginapi.KindSandbox, "sandbox", "backend", block)
	}
}

func (d *decoder) pool(p *Pool, raw *rawPool) {
	base := path("sandbox", "pool")
	if n, ok := d.integer(raw.Warm, append(base, "warm"), 0); ok {
		p.Warm = n
	}
	if n, ok := d.integer(raw.MaxTotal, append(base, "max_total"), 1); ok {
		p.MaxTotal = n
	}
	if t, ok := d.duration(raw.IdleTimeout, append(base, "idle_timeout")); ok {
		p.IdleTimeout = t
	}
	if n, ok := d.integer(raw.MaxUses, append(base, "max_uses"), 1); ok {
		p.MaxUses = n
	}
	if t, ok := d.duration(raw.QueueTimeout, append(base, "queue_timeout")); ok {
		p.QueueTimeout = t
	}
	if p.Warm > p.MaxTotal {
		subject := raw.DeclRange.Ptr()
		if raw.Warm != nil {
			subject = raw.Warm.Expr.Range().Ptr()
		}
		d.errorf(subject, "Pool warm count above maximum", "warm (%d) must not exceed max_total (%d).", p.Warm, p.MaxTotal)
	}
}

func (d *decoder) limits(l *Limits, raw *rawLimits) {
	base := path("sandbox", "limits")
	if n, ok := d.size(raw.Memory, append(base, "memory")); ok {
		l.Memory = n
	}
	if n, ok := d.integer(raw.PIDs, append(base, "pids"), 1); ok {
		l.PIDs = n
	}
	if t, ok := d.duration(raw.Timeout, append(base, "timeout")); ok {
		if t > MaxExecutionTimeout {
			d.errorf(raw.Timeout.Expr.Range().Ptr(), "Timeout too long",
				"An execution may run at most %s (the sandbox runtime cannot wait much longer); got %s.", MaxExecutionTimeout, t)
		}
		l.Timeout = t
	}
	if n, ok := d.size(raw.Output, append(base, "output")); ok {
		l.Output = n
	}
	if n, ok := d.size(raw.Tmp, append(base, "tmp")); ok {
		l.Tmp = n
	}
	if n, ok := d.size(raw.Shm, append(base, "shm")); ok {
		l.Shm = n
	}
	if n, ok := d.size(raw.MaxFile, append(base, "max_file_size")); ok {
		l.MaxFileSize = n
	}
	if n, ok := d.callSize(raw.MaxArg, append(base, "max_argument_size")); ok {
		l.MaxArgumentSize = n
	}
	if n, ok := d.callSize(raw.MaxResult, append(base, "max_result_size")); ok {
		l.MaxResultSize = n
	}
}

// callSize decodes a cap of one tool call's data, which must fit in one
// frame of the sandbox runtime.
func (d *decoder) callSize(attr *hcl.Attribute, p []string) (int64, bool) {
	n, ok := d.size(attr, p)
	if ok && n > runtime.MaxCallData {
		d.errorf(attr.Expr.Range().Ptr(), "Size too large", "%q: a tool call carries at most %d MiB through the sandbox; got %d bytes.",
			attr.Name, runtime.MaxCallData>>20, n)
		return 0, false
	}
	return n, ok
}

// diskQuota decodes a disk_quota, which must leave a tenant room to run
// (MinDiskQuota).
func (d *decoder) diskQuota(attr *hcl.Attribute, p []string) (int64, bool) {
	n, ok := d.size(attr, p)
	if ok && n < MinDiskQuota {
		d.errorf(attr.Expr.Range().Ptr(), "Size too small", "%q must be at least %d MiB, so that a tenant can run: a new tenant's own folders take about 44 KiB, and its disk counts as full with less than 128 KiB free; got %d bytes.",
			attr.Name, MinDiskQuota>>20, n)
		return 0, false
	}
	return n, ok
}

// maxFiles decodes a max_files, which must leave a tenant room to run
// (MinMaxFiles).
func (d *decoder) maxFiles(attr *hcl.Attribute, p []string) (int, bool) {
	n, ok := d.integer(attr, p, math.MinInt)
	if ok && n < MinMaxFiles {
		d.errorf(attr.Expr.Range().Ptr(), "Number out of range", "%q must be at least %d, not %d, so that a tenant can run: a new tenant already holds 16 files and folders, and every execution adds to them.",
			attr.Name, MinMaxFiles, n)
		return 0, false
	}
	return n, ok
}

func (d *decoder) mcpServers(cfg *Config, raws []*rawMCP) {
	for _, r := range raws {
		if !validName(r.Name) {
			d.errorf(r.NameRange.Ptr(), "Invalid mcp_server name", "Server names are 1-64 characters of a-z, 0-9, _ and -, starting with a letter or digit; got %q.", r.Name)
			continue
		}
		if prev := cfg.MCPServer(r.Name); prev != nil {
			d.errorf(r.DeclRange.Ptr(), "Duplicate mcp_server", "mcp_server %q is already configured at %s.", r.Name, prev.DeclRange)
			continue
		}
		base := path("mcp_servers", strconv.Itoa(len(cfg.MCPServers)))
		s := &MCPServer{Name: r.Name, Timeout: defaultMCPTimeout, DeclRange: r.DeclRange}
		s.Transport, _, _ = d.str(r.Transport, append(base, "transport"))
		d.scope(cfg, s, r, base)
		d.perTenantAttrs(cfg, s, r, base)
		s.Command, _, _ = d.str(r.Command, append(base, "command"))
		s.URL, s.URLSensitive, _ = d.str(r.URL, append(base, "url"))
		s.Optional, _ = d.boolean(r.Optional, append(base, "optional"))
		if t, ok := d.duration(r.Timeout, append(base, "timeout")); ok {
			s.Timeout = t
		}
		s.MaxArgumentSize, _ = d.callSize(r.MaxArg, append(base, "max_argument_size"))
		s.MaxResultSize, _ = d.callSize(r.MaxResult, append(base, "max_result_size"))
		d.checkMCP(s, r)
		d.oauth(s, r, base)
		cfg.MCPServers = append(cfg.MCPServers, s)
	}
}

// checkMCP validates the transport settings and fills in the inferred
// transport: stdio with command, sse for a URL ending in /sse, else http.
func (d *decoder) checkMCP(s *MCPServer, r *rawMCP) {
	if s.Transport == TransportBuiltin {
		d.checkBuiltin(s, r)
		return
	}
	switch {
	case s.Command == "" && s.URL == "":
		if r.Command == nil && r.URL == nil {
			d.errorf(r.DeclRange.Ptr(), "Missing required argument", "mcp_server %q needs either command (a local server over stdio) or url (a remote server over HTTP or SSE).", s.Name)
		}
		return
	case s.Command != "" && s.URL != "":
		d.errorf(r.URL.Range.Ptr(), "Conflicting arguments", "mcp_server %q sets both command and url; a server is either local (command) or remote (url).", s.Name)
		return
	}
	if s.Transport == "" {
		switch {
		case s.Command != "":
			s.Transport = TransportStdio
		case strings.HasSuffix(strings.TrimRight(urlPath(s.URL), "/"), "/sse"):
			s.Transport = TransportSSE
		default:
			s.Transport = TransportHTTP
		}
	}
	tr := hcl.Range{}
	if r.Transport != nil {
		tr = r.Transport.Expr.Range()
	}
	switch s.Transport {
	case TransportStdio:
		if s.Command == "" {
			d.errorf(tr.Ptr(), "Transport needs a command", "mcp_server %q: transport \"stdio\" runs a local command; set command instead of url.", s.Name)
		}
		if r.Headers != nil {
			d.errorf(r.Headers.Range.Ptr(), "Headers need a remote server", "mcp_server %q: headers apply to http and sse servers only; pass settings to a local server through env or args.", s.Name)
		}
	case TransportHTTP, TransportSSE:
		if s.URL == "" {
			d.errorf(tr.Ptr(), "Transport needs a url", "mcp_server %q: transport %q talks to a remote server; set url instead of command.", s.Name, s.Transport)
			return
		}
		for _, a := range []*hcl.Attribute{r.Args, r.Env, r.Cwd} {
			if a != nil {
				d.errorf(a.Range.Ptr(), "Argument needs a local server", "mcp_server %q: %s applies to local (command) servers only.", s.Name, a.Name)
			}
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.errorf(r.URL.Expr.Range().Ptr(), "Invalid url", "mcp_server %q: url must be an absolute http:// or https:// URL.", s.Name)
		}
	default:
		d.errorf(tr.Ptr(), "Invalid transport", "mcp_server %q: transport must be \"stdio\", \"http\", \"sse\" or \"builtin\"; got %q.", s.Name, s.Transport)
	}
}

// serverCommands reports each stdio server whose command cannot be run, as
// starting it would find it: in the PATH the server gets (its env's, else
// cexecd's) and, for a relative path, from its cwd. A tenant-scoped server
// is checked as the default tenant's instance, the one cexecd starts to
// list its tools. It runs after the tenant blocks, whose env may set PATH.
// A required server that cannot start stops cexecd from starting, so it is
// an error; an optional one is only a warning.
func (d *decoder) serverCommands(cfg *Config, raws []*rawMCP) {
	for _, s := range cfg.MCPServers {
		if s.Transport != TransportStdio || s.Command == "" {
			continue
		}
		srv, err := cfg.ServerForTenant(s.Name, endpoint.DefaultTenant)
		if err != nil {
			continue // its expressions already have their diagnostics
		}
		_, err = childenv.LookPath(srv.Command, childenv.Build(d.lookup, srv.Env), srv.Cwd)
		if err == nil {
			continue
		}
		i := slices.IndexFunc(raws, func(r *rawMCP) bool { return r.Name == s.Name })
		subject := raws[i].Command.Expr.Range().Ptr()
		fix := "install it, give its full path in command, or set PATH in env"
		if slices.Contains([]string{"npx", "node", "npm"}, srv.Command) {
			fix = "install Node.js and npm (apt-get install nodejs npm)"
		}
		if s.Optional {
			d.warnf(subject, "Cannot run server command", "mcp_server %q: %s. cexecd starts without this optional server and keeps trying: %s.", s.Name, err, fix)
		} else {
			d.errorf(subject, "Cannot run server command", "mcp_server %q: %s. cexecd does not start without a required server: %s. To start without it, set optional = true.", s.Name, err, fix)
		}
	}
}

// checkBuiltin validates a built-in server's block: a known name, and
// nothing that only a process or a remote server takes.
func (d *decoder) checkBuiltin(s *MCPServer, r *rawMCP) {
	if !slices.Contains(BuiltinServers, s.Name) {
		d.errorf(r.NameRange.Ptr(), "Unknown built-in server", "mcp_server %q: transport \"builtin\" serves one of cexecd's own servers (%s), named by the block; there is none called %q.", s.Name, strings.Join(BuiltinServers, ", "), s.Name)
	}
	for _, a := range []*hcl.Attribute{r.Command, r.URL, r.Args, r.Env, r.Cwd, r.Headers} {
		if a != nil {
			d.errorf(a.Range.Ptr(), "Argument not for a built-in server", "mcp_server %q: %s applies to local (command) or remote (url) servers, not to a built-in one.", s.Name, a.Name)
		}
	}
}

func urlPath(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Path
	}
	return s
}

var tenantRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidateTenantID checks a tenant id: 1-64 characters of a-z, 0-9, _ and
// -. The id names a directory under data_dir, so nothing that could walk
// out of it ("..", "/", NUL, other Unicode) is accepted.
func ValidateTenantID(id string) error {
	if !tenantRE.MatchString(id) {
		return fmt.Errorf("invalid tenant id %q: use 1-64 characters of a-z, 0-9, _ and -", id)
	}
	return nil
}

func (d *decoder) tenants(cfg *Config, raws []*rawTenant) {
	for _, r := range raws {
		if err := ValidateTenantID(r.ID); err != nil {
			d.errorf(r.IDRange.Ptr(), "Invalid tenant id", "%s.", err)
			continue
		}
		if prev := cfg.Tenant(r.ID); prev != nil {
			d.errorf(r.DeclRange.Ptr(), "Duplicate tenant", "tenant %q is already configured at %s.", r.ID, prev.DeclRange)
			continue
		}
		base := path("tenants", strconv.Itoa(len(cfg.Tenants)))
		t := &Tenant{ID: r.ID, DeclRange: r.DeclRange}
		if r.DiskQuota != nil {
			t.DiskQuota, _ = d.diskQuota(r.DiskQuota, append(base, "disk_quota"))
		}
		t.MaxConcurrent, _ = d.integer(r.MaxConcurrent, append(base, "max_concurrent"), 0)
		t.MaxFiles, _ = d.maxFiles(r.MaxFiles, append(base, "max_files"))
		if r.MaxSessionLog != nil {
			t.MaxSessionLog, _ = d.size(r.MaxSessionLog, append(base, "max_session_log"))
		}
		if r.SessionTTL != nil {
			t.SessionTTL, _ = d.duration(r.SessionTTL, append(base, "session_ttl"))
		}
		if l, ok := d.strList(r.AllowedServers, append(base, "allowed_servers")); ok {
			t.AllowedServers = l
			for i, name := range l {
				if cfg.MCPServer(name) == nil {
					d.warnf(elemRange(r.AllowedServers.Expr, i).Ptr(), "Unknown server in allowed_servers",
						"tenant %q allows %q, which is not a configured mcp_server; that is only right for a local tool package under servers/.", r.ID, name)
				}
			}
		}
		if r.Policy != nil {
			t.Policy, t.PolicyRange = r.Policy.Body, r.Policy.DeclRange
		}
		d.serverOverrides(cfg, t, r.Servers, base)
		cfg.Tenants = append(cfg.Tenants, t)
	}
}
