package config

import "github.com/hashicorp/hcl/v2"

// The raw* structs are the file's shape for gohcl. Attributes stay
// *hcl.Attribute so that decoding keeps every range and can see the env()
// marks on values, which gohcl's own conversion would reject.

type rawFile struct {
	Daemon     *rawDaemon   `hcl:"cexec,block"`
	Plugins    []*rawPlugin `hcl:"plugin,block"`
	Pipeline   *rawPipeline `hcl:"pipeline,block"`
	Sandbox    *rawSandbox  `hcl:"sandbox,block"`
	MCPServers []*rawMCP    `hcl:"mcp_server,block"`
	Tenants    []*rawTenant `hcl:"tenant,block"`
	MCP        *rawMCPFace  `hcl:"mcp,block"`
	Store      *rawStore    `hcl:"store,block"`

	// Telemetry: see Telemetry (telemetry.go).
	Telemetry *rawTelemetry `hcl:"telemetry,block"`
	Metrics   *rawMetrics   `hcl:"metrics,block"`
	Audit     *rawAudit     `hcl:"audit,block"`
}

type rawMetrics struct {
	Listen    *hcl.Attribute `hcl:"listen,optional"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

type rawAudit struct {
	RotateSize *hcl.Attribute `hcl:"rotate_size,optional"`
	Keep       *hcl.Attribute `hcl:"keep,optional"`
	DeclRange  hcl.Range      `hcl:",def_range"`
}

type rawDaemon struct {
	DataDir    *hcl.Attribute `hcl:"data_dir,optional"`
	Socket     *hcl.Attribute `hcl:"socket,optional"`
	LogLevel   *hcl.Attribute `hcl:"log_level,optional"`
	PluginDir  *hcl.Attribute `hcl:"plugin_dir,optional"`
	ServersDir *hcl.Attribute `hcl:"servers_dir,optional"`
	SkillsDir  *hcl.Attribute `hcl:"skills_dir,optional"`
	Sync       *hcl.Attribute `hcl:"sync,optional"`
	TenantUIDs *hcl.Attribute `hcl:"tenant_uids,optional"`
	DiskQuota  *hcl.Attribute `hcl:"disk_quota,optional"`
	MaxFiles   *hcl.Attribute `hcl:"max_files,optional"`
	Replica    *hcl.Attribute `hcl:"replica,optional"`
	DeclRange  hcl.Range      `hcl:",def_range"`
}

type rawPlugin struct {
	Kind      string         `hcl:"kind,label"`
	Name      string         `hcl:"name,label"`
	KindRange hcl.Range      `hcl:"kind,label_range"`
	NameRange hcl.Range      `hcl:"name,label_range"`
	Command   *hcl.Attribute `hcl:"command,optional"`
	Args      *hcl.Attribute `hcl:"args,optional"`
	SHA256    *hcl.Attribute `hcl:"sha256,optional"`
	Required  *hcl.Attribute `hcl:"required,optional"`
	Timeout   *hcl.Attribute `hcl:"timeout,optional"`
	Env       *hcl.Attribute `hcl:"env,optional"`
	Body      hcl.Body       `hcl:",remain"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

type rawPipeline struct {
	Selector    *hcl.Attribute `hcl:"selector,optional"`
	Codegen     *hcl.Attribute `hcl:"codegen,optional"`
	Guards      *hcl.Attribute `hcl:"guards,optional"`
	MaxRepairs  *hcl.Attribute `hcl:"max_repairs,optional"`
	SearchLimit *hcl.Attribute `hcl:"search_limit,optional"`
	// MaxInlineAttachment: see Pipeline.MaxInlineAttachment.
	MaxInlineAttachment *hcl.Attribute `hcl:"max_inline_attachment,optional"`
	DeclRange           hcl.Range      `hcl:",def_range"`
}

type rawSandbox struct {
	Backend *hcl.Attribute `hcl:"backend,optional"`
	Network *hcl.Attribute `hcl:"network,optional"`
	// SessionInterpreter: see Sandbox.SessionInterpreter.
	SessionInterpreter *hcl.Attribute `hcl:"session_interpreter,optional"`
	Pool               *rawPool       `hcl:"pool,block"`
	Limits             *rawLimits     `hcl:"limits,block"`
	DeclRange          hcl.Range      `hcl:",def_range"`
}

type rawPool struct {
	Warm        *hcl.Attribute `hcl:"warm,optional"`
	MaxTotal    *hcl.Attribute `hcl:"max_total,optional"`
	IdleTimeout *hcl.Attribute `hcl:"idle_timeout,optional"`
	MaxUses     *hcl.Attribute `hcl:"max_uses,optional"`
	// QueueTimeout: see Pool.QueueTimeout.
	QueueTimeout *hcl.Attribute `hcl:"queue_timeout,optional"`
	DeclRange    hcl.Range      `hcl:",def_range"`
}

type rawLimits struct {
	Memory    *hcl.Attribute `hcl:"memory,optional"`
	PIDs      *hcl.Attribute `hcl:"pids,optional"`
	Timeout   *hcl.Attribute `hcl:"timeout,optional"`
	Output    *hcl.Attribute `hcl:"output,optional"`
	Tmp       *hcl.Attribute `hcl:"tmp,optional"`
	Shm       *hcl.Attribute `hcl:"shm,optional"`
	MaxFile   *hcl.Attribute `hcl:"max_file_size,optional"`
	MaxArg    *hcl.Attribute `hcl:"max_argument_size,optional"`
	MaxResult *hcl.Attribute `hcl:"max_result_size,optional"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

type rawMCP struct {
	Name      string         `hcl:"name,label"`
	NameRange hcl.Range      `hcl:"name,label_range"`
	Command   *hcl.Attribute `hcl:"command,optional"`
	Args      *hcl.Attribute `hcl:"args,optional"`
	Env       *hcl.Attribute `hcl:"env,optional"`
	Cwd       *hcl.Attribute `hcl:"cwd,optional"`
	URL       *hcl.Attribute `hcl:"url,optional"`
	Transport *hcl.Attribute `hcl:"transport,optional"`
	Headers   *hcl.Attribute `hcl:"headers,optional"`
	Optional  *hcl.Attribute `hcl:"optional,optional"`
	Timeout   *hcl.Attribute `hcl:"timeout,optional"`
	MaxArg    *hcl.Attribute `hcl:"max_argument_size,optional"`
	MaxResult *hcl.Attribute `hcl:"max_result_size,optional"`
	Scope     *hcl.Attribute `hcl:"scope,optional"`
	IdleTime  *hcl.Attribute `hcl:"idle_timeout,optional"`
	MaxInst   *hcl.Attribute `hcl:"max_instances,optional"`
	OAuth     *rawOAuth      `hcl:"oauth,block"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

// rawServerOverride is an `mcp_server "<name>" { ... }` block inside a
// tenant block: that tenant's env and headers for a tenant-scoped server.
type rawServerOverride struct {
	Name      string         `hcl:"name,label"`
	NameRange hcl.Range      `hcl:"name,label_range"`
	Env       *hcl.Attribute `hcl:"env,optional"`
	Headers   *hcl.Attribute `hcl:"headers,optional"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

type rawTenant struct {
	ID             string               `hcl:"id,label"`
	IDRange        hcl.Range            `hcl:"id,label_range"`
	DiskQuota      *hcl.Attribute       `hcl:"disk_quota,optional"`
	MaxConcurrent  *hcl.Attribute       `hcl:"max_concurrent,optional"`
	MaxSessionLog  *hcl.Attribute       `hcl:"max_session_log,optional"`
	SessionTTL     *hcl.Attribute       `hcl:"session_ttl,optional"`
	AllowedServers *hcl.Attribute       `hcl:"allowed_servers,optional"`
	Policy         *rawPolicy           `hcl:"policy,block"`
	Servers        []*rawServerOverride `hcl:"mcp_server,block"`
	DeclRange      hcl.Range            `hcl:",def_range"`
	MaxFiles       *hcl.Attribute       `hcl:"max_files,optional"`
}

// rawPolicy keeps the tenant policy undecoded: its schema belongs to the
// guardrails work, which decodes Tenant.Policy itself.
type rawPolicy struct {
	Body      hcl.Body  `hcl:",remain"`
	DeclRange hcl.Range `hcl:",def_range"`
}

// rawMCPFace is the `mcp` block: cexecd's own MCP face (not an upstream
// mcp_server).
type rawMCPFace struct {
	Listen         *hcl.Attribute `hcl:"listen,optional"`
	Tokens         *hcl.Attribute `hcl:"tokens,optional"`
	AllowedOrigins *hcl.Attribute `hcl:"allowed_origins,optional"`
	SSE            *hcl.Attribute `hcl:"sse,optional"`

	ReadHeaderTimeout     *hcl.Attribute `hcl:"read_header_timeout,optional"`
	ReadTimeout           *hcl.Attribute `hcl:"read_timeout,optional"`
	IdleTimeout           *hcl.Attribute `hcl:"idle_timeout,optional"`
	MaxConnections        *hcl.Attribute `hcl:"max_connections,optional"`
	MaxConnectionsPerPeer *hcl.Attribute `hcl:"max_connections_per_peer,optional"`
	MaxRequestBody        *hcl.Attribute `hcl:"max_request_body,optional"`
	MaxSessionsPerTenant  *hcl.Attribute `hcl:"max_sessions_per_tenant,optional"`
	SessionIdleTimeout    *hcl.Attribute `hcl:"session_idle_timeout,optional"`

	OAuth *rawMCPOAuth `hcl:"oauth,block"`

	DeclRange hcl.Range `hcl:",def_range"`
}
