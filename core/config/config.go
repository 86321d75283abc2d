// Package config loads cexec.hcl: the daemon's settings, the plugins it
// launches, the execution pipeline, the sandbox pool, upstream MCP servers and
// tenants. Every problem is an hcl.Diagnostic that points at a file:line, so
// `cexecd validate` can show users exactly what to fix.
//
// Precedence, lowest first: built-in defaults, cexec.hcl, CEXEC_* environment
// variables, command-line flags (Overrides).
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/pluginapi"
)

// Config is the effective configuration of cexecd.
type Config struct {
	// Path is the absolute path of the config file.
	Path       string
	Daemon     Daemon
	Plugins    []*Plugin
	Pipeline   Pipeline
	Sandbox    Sandbox
	MCPServers []*MCPServer
	Tenants    []*Tenant
	// MCP is cexecd's own MCP face (the mcp block).
	MCP MCP
	// Metrics is the Prometheus endpoint (the metrics block).
	Metrics Metrics
	// Audit sizes the per-tenant audit logs (the audit block).
	Audit Audit
	// Store is where what replicas share is kept (the store block).
	Store Store
	// Telemetry is the telemetry block: where traces are exported.
	Telemetry Telemetry

	files map[string]*hcl.File
	// sensitive holds paths into the MaskedJSON view whose values came from
	// env() and must never be shown.
	sensitive [][]string
	// secrets holds the values env() returned (Secrets).
	secrets *secretSet
}

// Daemon is the `cexec { ... }` block.
type Daemon struct {
	// DataDir holds tenant workspaces, sessions and caches (absolute).
	DataDir string
	// Socket is the control API's unix socket (absolute).
	Socket string
	// LogLevel is one of trace, debug, info, warn, error.
	LogLevel string
	// PluginDir is the only directory plugin binaries are run from (absolute).
	PluginDir string
	// ServersDir is the tool tree sandboxes import as `servers`: generated
	// stubs (written by the daemon) beside hand-written local tool packages
	// (never overwritten). Its last element must be "servers".
	ServersDir string
	// SkillsDir holds the shared, read-only skills (mounted at /cexec/skills).
	SkillsDir string
	// Sync is how state writes and session logs reach the disk: "batched"
	// (state contents fsynced before they replace the old ones, folder
	// entries and log lines fsynced in the background every 200 ms) or
	// "always" (every write fsynced with its folder before it returns).
	Sync string
	// TenantUIDs is the range of host uids (and gids, the same numbers)
	// tenants get one each of when cexecd runs as root; nil when not set.
	TenantUIDs *IDRange
	// DiskQuota and MaxFiles hold every tenant without its own: no tenant
	// may fill the file system that holds data_dir.
	DiskQuota int64
	MaxFiles  int
	// Replica is this cexecd's id among replicas sharing a store: it
	// prefixes MCP session ids ("a.<id>") so a proxy can route on it.
	// Derived from the host name with a postgres store when not set; ""
	// otherwise (session ids carry no prefix).
	Replica string
}

// IDRange is an inclusive range of host user ids.
type IDRange struct{ First, Last uint32 }

// Size is how many ids the range holds.
func (r IDRange) Size() int64 { return int64(r.Last) - int64(r.First) + 1 }

// Defaults of the tenant limits that apply when neither the tenant block
// nor the cexec block sets one.
const (
	DefaultDiskQuota = 1 << 30
	DefaultMaxFiles  = 131072
	// DefaultMaxFileSize is sandbox.limits' max_file_size.
	DefaultMaxFileSize = 256 << 20
)

// Floors of disk_quota and max_files. A new tenant already holds 44 KiB in
// 16 files and folders (in its disk image: ext4's root, lost+found and
// reserved inodes beside the tenant's own folders), the image counts as
// full with less than 128 KiB free, and every execution adds to the
// session log: below about 150 KiB or 18 files not one execution starts.
// The floors leave room for a few dozen; 1 MiB is also the smallest quota
// the end-to-end tests run tenants with.
const (
	MinDiskQuota = 1 << 20
	MinMaxFiles  = 64
)

// Overrides are the command-line flags of cexecd, which win over everything
// else. Empty fields are not set.
type Overrides struct {
	DataDir        string
	Socket         string
	LogLevel       string
	PluginDir      string
	SandboxBackend string
	// LookupEnv reads the environment (CEXEC_* overrides, env() in the file,
	// XDG defaults). Nil means os.LookupEnv; tests inject a map.
	LookupEnv func(key string) (string, bool)
}

// LogLevels lists the accepted log levels, most verbose first.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}

// Environment variables that override the file (and are overridden by flags).
const (
	EnvDataDir        = "CEXEC_DATA_DIR"
	EnvSocket         = endpoint.SocketEnv
	EnvLogLevel       = "CEXEC_LOG_LEVEL"
	EnvPluginDir      = "CEXEC_PLUGIN_DIR"
	EnvSandboxBackend = "CEXEC_SANDBOX_BACKEND"
)

func defaultDataDir(lookup func(string) (string, bool)) (string, bool) {
	if dir, ok := lookup("XDG_DATA_HOME"); ok && dir != "" {
		return filepath.Join(dir, "cexec"), true
	}
	if home, ok := lookup("HOME"); ok && home != "" {
		return filepath.Join(home, ".local", "share", "cexec"), true
	}
	return "", false
}

// Files returns the parsed config files by name, for FormatDiagnostics.
func (c *Config) Files() map[string]*hcl.File {
	return c.files
}

// Plugin returns the configured plugin of that kind and name, or nil.
func (c *Config) Plugin(kind pluginapi.Kind, name string) *Plugin {
	for _, p := range c.Plugins {
		if p.Kind == kind && p.Name == name {
			return p
		}
	}
	return nil
}

// PluginsOfKind returns the configured plugins of one kind in file order.
func (c *Config) PluginsOfKind(kind pluginapi.Kind) []*Plugin {
	var out []*Plugin
	for _, p := range c.Plugins {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

// MCPServer returns the mcp_server block with that name, or nil.
func (c *Config) MCPServer(name string) *MCPServer {
	for _, s := range c.MCPServers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Tenant returns the tenant block with that id, or nil.
func (c *Config) Tenant(id string) *Tenant {
	for _, t := range c.Tenants {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// Load reads and validates the config file at path. The returned Config is
// nil only when the file cannot be read or parsed; otherwise it is filled in
// as far as possible even when diags has errors, so callers such as
// `cexecd validate` can go on to report more problems. A Config with error
// diagnostics must not be used to serve.
func Load(path string, ov Overrides) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read config file",
			Detail:   err.Error(),
		}}
	}
	return load(src, path, ov)
}

// load is Load on bytes already read; filename is used in diagnostics and
// its directory anchors relative paths.
func load(src []byte, filename string, ov Overrides) (*Config, hcl.Diagnostics) {
	abs, err := filepath.Abs(filename)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot resolve config path", Detail: err.Error()}}
	}
	lookup := ov.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}

	parser := hclparse.NewParser()
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(filename, ".json") {
		file, diags = parser.ParseJSON(src, filename)
	} else {
		file, diags = parser.ParseHCL(src, filename)
	}
	if diags.HasErrors() || file == nil {
		return nil, diags
	}

	var raw rawFile
	diags = append(diags, gohcl.DecodeBody(file.Body, nil, &raw)...)

	secrets := &secretSet{}
	d := &decoder{
		ctx:    evalContext(lookup, secrets),
		dir:    filepath.Dir(abs),
		lookup: lookup,
	}
	cfg := &Config{Path: abs, files: parser.Files(), secrets: secrets}
	d.daemon(cfg, raw.Daemon, ov)
	d.plugins(cfg, raw.Plugins)
	d.pipeline(cfg, raw.Pipeline)
	d.sandbox(cfg, raw.Sandbox, ov)
	d.mcpServers(cfg, raw.MCPServers)
	d.tenants(cfg, raw.Tenants)
	d.serverCommands(cfg, raw.MCPServers)
	d.mcp(cfg, raw.MCP)
	d.metrics(cfg, raw.Metrics)
	d.audit(cfg, raw.Audit)
	d.store(cfg, raw.Store, raw.Daemon)
	d.telemetry(cfg, raw.Telemetry)
	cfg.sensitive = d.sensitive
	return cfg, append(diags, d.diags...)
}

// override is one CEXEC_* variable or flag applied over the file.
type override struct {
	value  string
	source string
}

// pick returns the winning override of env var key and flag value, if any.
func pick(lookup func(string) (string, bool), key, flag string) (override, bool) {
	if flag != "" {
		return override{flag, "command-line flag"}, true
	}
	if v, ok := lookup(key); ok && v != "" {
		return override{v, "environment variable " + key}, true
	}
	return override{}, false
}

func (d *decoder) daemon(cfg *Config, raw *rawDaemon, ov Overrides) {
	dd := &cfg.Daemon
	dd.LogLevel = "info"
	dd.Socket = endpoint.DefaultSocketFrom(d.lookup)
	dd.PluginDir = filepath.Join(d.dir, "bin")
	dd.ServersDir = filepath.Join(d.dir, "servers")
	dd.SkillsDir = filepath.Join(d.dir, "skills")
	dd.Sync = "batched"
	dd.DiskQuota, dd.MaxFiles = DefaultDiskQuota, DefaultMaxFiles
	dataDirKnown := false
	dd.DataDir, dataDirKnown = defaultDataDir(d.lookup)

	var declRange *hcl.Range
	if raw != nil {
		declRange = raw.DeclRange.Ptr()
		if s, _, ok := d.str(raw.DataDir, path("cexec", "data_dir")); ok {
			dd.DataDir, dataDirKnown = d.abs(s), true
		}
		if s, _, ok := d.str(raw.Socket, path("cexec", "socket")); ok {
			dd.Socket = d.abs(s)
		}
		if s, _, ok := d.str(raw.LogLevel, path("cexec", "log_level")); ok {
			if d.checkLogLevel(s, raw.LogLevel.Expr.Range().Ptr(), "") {
				dd.LogLevel = s
			}
		}
		if s, _, ok := d.str(raw.PluginDir, path("cexec", "plugin_dir")); ok {
			dd.PluginDir = d.abs(s)
		}
		if s, _, ok := d.str(raw.ServersDir, path("cexec", "servers_dir")); ok {
			if filepath.Base(s) != "servers" {
				d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid servers_dir",
					Detail:  fmt.Sprintf("%q must end in a directory named servers: sandboxed code imports tools as servers.<server>.", s),
					Subject: raw.ServersDir.Expr.Range().Ptr()})
			} else {
				dd.ServersDir = d.abs(s)
			}
		}
		if s, _, ok := d.str(raw.SkillsDir, path("cexec", "skills_dir")); ok {
			dd.SkillsDir = d.abs(s)
		}
		if s, _, ok := d.str(raw.Sync, path("cexec", "sync")); ok {
			if s != "batched" && s != "always" {
				d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid sync",
					Detail:  fmt.Sprintf("%q is not a sync policy: use \"batched\" (the default) or \"always\".", s),
					Subject: raw.Sync.Expr.Range().Ptr()})
			} else {
				dd.Sync = s
			}
		}
		if s, _, ok := d.str(raw.TenantUIDs, path("cexec", "tenant_uids")); ok {
			dd.TenantUIDs = d.idRange(s, raw.TenantUIDs)
		}
		if n, ok := d.diskQuota(raw.DiskQuota, path("cexec", "disk_quota")); ok {
			dd.DiskQuota = n
		}
		if n, ok := d.maxFiles(raw.MaxFiles, path("cexec", "max_files")); ok {
			dd.MaxFiles = n
		}
	}

	// Overrides are relative to the working directory, as a user typing a
	// flag or exporting a variable would expect.
	if o, ok := pick(d.lookup, EnvDataDir, ov.DataDir); ok {
		dd.DataDir, dataDirKnown = cwdAbs(o.value), true
	}
	if o, ok := pick(d.lookup, EnvSocket, ov.Socket); ok {
		dd.Socket = cwdAbs(o.value)
	}
	if o, ok := pick(d.lookup, EnvLogLevel, ov.LogLevel); ok {
		if d.checkLogLevel(o.value, nil, o.source) {
			dd.LogLevel = o.value
		}
	}
	if o, ok := pick(d.lookup, EnvPluginDir, ov.PluginDir); ok {
		dd.PluginDir = cwdAbs(o.value)
	}
	if !dataDirKnown {
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No data directory",
			Detail:   "Neither data_dir, " + EnvDataDir + ", XDG_DATA_HOME nor HOME is set; set data_dir in the cexec block.",
			Subject:  declRange,
		})
	}
}

func (d *decoder) checkLogLevel(level string, subject *hcl.Range, source string) bool {
	if slices.Contains(LogLevels, level) {
		return true
	}
	summary := fmt.Sprintf("Invalid log level %q", level)
	if source != "" {
		summary += " from " + source
	}
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   "log_level must be one of " + strings.Join(LogLevels, ", ") + ".",
		Subject:  subject,
	})
	return false
}

// abs resolves a path from the file against the file's directory.
func (d *decoder) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(d.dir, p)
}

func cwdAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// path builds a MaskedJSON path.
func path(elems ...string) []string { return elems }

// Duration defaults shared by decoding and documentation.
const (
	defaultPluginTimeout = 30 * time.Second
	defaultMCPTimeout    = 60 * time.Second
)

// Host ids no tenant may get: root, and nobody and the overflow id (65534,
// 65535), which other host processes run as or see unmapped users as.
var reservedIDs = []uint32{0, 65534, 65535}

// idRange decodes "FIRST-LAST", an inclusive range of host uids that holds
// no reserved id, or reports why not on attr.
func (d *decoder) idRange(s string, attr *hcl.Attribute) *IDRange {
	bad := func(detail string, args ...any) *IDRange {
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid tenant_uids",
			Detail: fmt.Sprintf(detail, args...), Subject: attr.Expr.Range().Ptr()})
		return nil
	}
	a, b, found := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	switch {
	case !found || err1 != nil || err2 != nil:
		return bad("%q is not a range of host uids such as \"200000-265535\" (first-last, inclusive).", s)
	case first > last:
		return bad("%q starts after it ends.", s)
	case last == 1<<32-1:
		return bad("%q includes 4294967295, which is no valid id.", s)
	}
	for _, id := range reservedIDs {
		if uint64(id) >= first && uint64(id) <= last {
			return bad("%q includes %d; tenants never share root's, nobody's or the overflow id: choose ids no host user has, such as \"200000-265535\".", s, id)
		}
	}
	return &IDRange{First: uint32(first), Last: uint32(last)}
}
