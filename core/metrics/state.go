package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Sources read the state other packages own, at scrape time. Any may be
// nil (that part is not running).
type Sources struct {
	Pool      func() PoolState
	Upstreams func() []Component
	Plugins   func() []Component
	Quotas    func() []TenantUsage
	// MCPSessions returns live MCP sessions by tenant.
	MCPSessions func() map[string]int
}

// PoolState is the sandbox pool's size.
type PoolState struct {
	Idle     map[string]int // by tenant
	Busy     map[string]int // by tenant
	Creating int
	MaxTotal int
}

// Component is an upstream server or a plugin: its state and restarts.
type Component struct {
	Kind  string // plugin kind; "" for upstreams
	Name  string
	State string
	// Up: ready (upstream) or running (plugin).
	Up       bool
	Restarts int
}

// TenantUsage is a tenant's disk use; -1 is unknown.
type TenantUsage struct {
	Tenant                    string
	Bytes, Files              int64
	QuotaBytes, QuotaMaxFiles int64
}

var (
	poolDesc          = prometheus.NewDesc("cexec_pool_sandboxes", "Sandboxes the pool holds, by tenant and state (idle, busy).", []string{"tenant", "state"}, nil)
	poolCreatingDesc  = prometheus.NewDesc("cexec_pool_creating", "Sandboxes being created.", nil, nil)
	poolMaxDesc       = prometheus.NewDesc("cexec_pool_max_sandboxes", "The pool's cap on sandboxes (sandbox.pool max_total).", nil, nil)
	upstreamDesc      = prometheus.NewDesc("cexec_upstream_state", "1 for each upstream MCP server's current state (connecting, ready, failed, ...).", []string{"server", "state"}, nil)
	upstreamUpDesc    = prometheus.NewDesc("cexec_upstream_up", "1 when the upstream MCP server is ready.", []string{"server"}, nil)
	upstreamRestDesc  = prometheus.NewDesc("cexec_upstream_restarts_total", "Upstream connections lost and re-established.", []string{"server"}, nil)
	pluginDesc        = prometheus.NewDesc("cexec_plugin_state", "1 for each plugin's current state (running, restarting, failed, ...).", []string{"kind", "plugin", "state"}, nil)
	pluginUpDesc      = prometheus.NewDesc("cexec_plugin_up", "1 when the plugin is running.", []string{"kind", "plugin"}, nil)
	pluginRestDesc    = prometheus.NewDesc("cexec_plugin_restarts_total", "Plugin relaunches after its process exited.", []string{"kind", "plugin"}, nil)
	quotaUsedDesc     = prometheus.NewDesc("cexec_tenant_disk_used_bytes", "What a loaded tenant stores (its image's blocks in use, or the measured workspace).", []string{"tenant"}, nil)
	quotaBytesDesc    = prometheus.NewDesc("cexec_tenant_disk_quota_bytes", "A loaded tenant's disk quota (0: unlimited).", []string{"tenant"}, nil)
	quotaFilesDesc    = prometheus.NewDesc("cexec_tenant_files", "Files and folders a loaded tenant's image holds.", []string{"tenant"}, nil)
	quotaMaxFilesDesc = prometheus.NewDesc("cexec_tenant_max_files", "A loaded tenant's max_files (0: unlimited).", []string{"tenant"}, nil)
	sessionsDesc      = prometheus.NewDesc("cexec_mcp_sessions", "Live MCP sessions, by tenant.", []string{"tenant"}, nil)
)

type stateCollector struct{ s Sources }

// NewStateCollector returns a collector over s, for a registry the daemon
// passes to Handler.
func NewStateCollector(s Sources) prometheus.Collector { return stateCollector{s} }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolDesc, poolCreatingDesc, poolMaxDesc, upstreamDesc, upstreamUpDesc, upstreamRestDesc,
		pluginDesc, pluginUpDesc, pluginRestDesc, quotaUsedDesc, quotaBytesDesc, quotaFilesDesc, quotaMaxFilesDesc, sessionsDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	if c.s.Pool != nil {
		p := c.s.Pool()
		for t, n := range p.Idle {
			gauge(poolDesc, float64(n), t, "idle")
		}
		for t, n := range p.Busy {
			gauge(poolDesc, float64(n), t, "busy")
		}
		gauge(poolCreatingDesc, float64(p.Creating))
		gauge(poolMaxDesc, float64(p.MaxTotal))
	}
	if c.s.Upstreams != nil {
		for _, u := range c.s.Upstreams() {
			gauge(upstreamDesc, 1, u.Name, u.State)
			gauge(upstreamUpDesc, b2f(u.Up), u.Name)
			counter(upstreamRestDesc, float64(u.Restarts), u.Name)
		}
	}
	if c.s.Plugins != nil {
		for _, p := range c.s.Plugins() {
			gauge(pluginDesc, 1, p.Kind, p.Name, p.State)
			gauge(pluginUpDesc, b2f(p.Up), p.Kind, p.Name)
			counter(pluginRestDesc, float64(p.Restarts), p.Kind, p.Name)
		}
	}
	if c.s.Quotas != nil {
		for _, q := range c.s.Quotas() {
			if q.Bytes >= 0 {
				gauge(quotaUsedDesc, float64(q.Bytes), q.Tenant)
			}
			if q.Files >= 0 {
				gauge(quotaFilesDesc, float64(q.Files), q.Tenant)
			}
			gauge(quotaBytesDesc, float64(q.QuotaBytes), q.Tenant)
			gauge(quotaMaxFilesDesc, float64(q.QuotaMaxFiles), q.Tenant)
		}
	}
	if c.s.MCPSessions != nil {
		for t, n := range c.s.MCPSessions() {
			gauge(sessionsDesc, float64(n), t)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
