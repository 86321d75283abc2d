// Package metrics holds cexecd's Prometheus metrics: one private registry
// (never client_golang's global one) and the cexec_* series the daemon's
// packages update where things happen. Counters and histograms live here so
// that core packages depend on this package, not on each other; gauges of
// state other packages own (pool sizes, upstream and plugin states, quota
// use, MCP sessions) are read at scrape time by collectors the daemon
// registers (Register), so nothing is updated on the hot path for them.
//
// Label values are bounded: tenants are validated ids, servers and tools
// are the catalog's (a call to an unknown tool counts under "unknown"),
// outcomes and detection types are short fixed sets.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcomes of an execution and of a tool call.
const (
	// OutcomeOK: the program exited 0, the call returned.
	OutcomeOK = "ok"
	// OutcomeError: the program failed (exception, exit code, timeout) or
	// the call returned an error.
	OutcomeError = "error"
	// OutcomeDenied: the tenant's policy or a guard refused it.
	OutcomeDenied = "denied"
	// OutcomeTimeout: the program ran out of time.
	OutcomeTimeout = "timeout"
	// OutcomeRefused: it was not started for a limit (disk quota,
	// max_concurrent, a full pool) or an invalid request (session id).
	OutcomeRefused = "refused"
	// OutcomeFailed: it could not be run for another reason (backend
	// down, the sandbox lost).
	OutcomeFailed = "failed"
	// OutcomeCancelled: its request ended before it did (the client
	// cancelled or closed its session, or cexecd shut down).
	OutcomeCancelled = "cancelled"
)

// Unknown stands for a label value that is not one of a bounded set (a
// tool the catalog does not have).
const Unknown = "unknown"

// latency buckets, in seconds: 1 ms to 60 s. Tool calls and executions
// span warm in-process calls to minute-long programs.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

var (
	registry = prometheus.NewRegistry()

	executions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cexec_executions_total",
		Help: "Executions (execute_code, execute_task's runs, call_tool, cexecctl exec) by tenant and outcome.",
	}, []string{"tenant", "outcome"})
	executionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cexec_execution_duration_seconds",
		Help:    "Execution latency as the daemon saw it (lease, run, guards, log), by tenant.",
		Buckets: latencyBuckets,
	}, []string{"tenant"})
	toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cexec_tool_calls_total",
		Help: "Tool calls from sandboxed code and the MCP face's call_tool, by server, tool and outcome.",
	}, []string{"server", "tool", "outcome"})
	toolCallSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cexec_tool_call_duration_seconds",
		Help:    "Tool call latency (checks, guards and the upstream call), by server and tool.",
		Buckets: latencyBuckets,
	}, []string{"server", "tool"})
	searchSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cexec_search_duration_seconds",
		Help:    "search_tools latency, by what answered (selector or fallback).",
		Buckets: latencyBuckets,
	}, []string{"via"})
	pluginCallSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cexec_plugin_call_duration_seconds",
		Help:    "Plugin gRPC call latency by plugin kind, name and method (streams: until the stream ends).",
		Buckets: latencyBuckets,
	}, []string{"kind", "plugin", "method"})
	pluginCallErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cexec_plugin_call_errors_total",
		Help: "Plugin gRPC calls that failed, by plugin kind, name and method.",
	}, []string{"kind", "plugin", "method"})
	detections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cexec_guard_detections_total",
		Help: "PII and secrets the guards detected in model-facing text, by type (EMAIL, PHONE, ...).",
	}, []string{"type"})
	denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cexec_policy_denials_total",
		Help: "Code and tool calls refused by a tenant's policy or a guard, by tenant and what was refused (code, tool_call).",
	}, []string{"tenant", "what"})
	mcpConnections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cexec_mcp_connections",
		Help: "Open TCP connections to the MCP face.",
	})
	mcpRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cexec_mcp_connections_refused_total",
		Help: "TCP connections to the MCP face closed at once for being over max_connections or max_connections_per_peer.",
	})
	auditErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cexec_audit_write_errors_total",
		Help: "Audit events that could not be written, by tenant (\"\" is the daemon's own log).",
	}, []string{"tenant"})
	reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cexec_config_reloads_total",
		Help: "Config reloads on SIGHUP by result (applied; invalid: the file has errors and the previous config stays).",
	}, []string{"result"})
)

func init() {
	registry.MustRegister(executions, executionSeconds, toolCalls, toolCallSeconds, searchSeconds,
		pluginCallSeconds, pluginCallErrors, detections, denials, mcpConnections, mcpRefused, auditErrors, reloads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Handler serves the registry and the daemon's collectors in the
// Prometheus text format.
func Handler(extra prometheus.Gatherer) http.Handler {
	g := prometheus.Gatherers{registry}
	if extra != nil {
		g = append(g, extra)
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// pair and triple key the label-child caches: a lookup of an array key in
// a map does not allocate, unlike WithLabelValues' variadic slice.
type (
	pair   [2]string
	triple [3]string
)

// children caches a vector's children by label values.
type children[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *children[K, V]) get(k K, create func(K) V) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.m == nil {
		c.m = map[K]V{}
	}
	v = create(k)
	c.m[k] = v
	return v
}

// forget drops the children whose key matches, after their series were
// deleted (a removed tenant).
func (c *children[K, V]) forget(match func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if match(k) {
			delete(c.m, k)
		}
	}
}

var (
	execChildren     children[pair, prometheus.Counter]
	execSecChildren  children[string, prometheus.Observer]
	callChildren     children[triple, prometheus.Counter]
	callSecChildren  children[pair, prometheus.Observer]
	pluginSecChild   children[triple, prometheus.Observer]
	pluginErrChild   children[triple, prometheus.Counter]
	detectChildren   children[string, prometheus.Counter]
	denialChildren   children[pair, prometheus.Counter]
	auditErrChildren children[string, prometheus.Counter]
)

// Execution counts one execution of tenant and its latency.
func Execution(tenant, outcome string, d time.Duration) {
	execChildren.get(pair{tenant, outcome}, func(k pair) prometheus.Counter {
		return executions.WithLabelValues(k[0], k[1])
	}).Inc()
	execSecChildren.get(tenant, func(t string) prometheus.Observer {
		return executionSeconds.WithLabelValues(t)
	}).Observe(d.Seconds())
}

// ToolCall counts one tool call and its latency; server and tool are
// Unknown when the catalog has no such tool.
func ToolCall(server, tool, outcome string, d time.Duration) {
	callChildren.get(triple{server, tool, outcome}, func(k triple) prometheus.Counter {
		return toolCalls.WithLabelValues(k[0], k[1], k[2])
	}).Inc()
	callSecChildren.get(pair{server, tool}, func(k pair) prometheus.Observer {
		return toolCallSeconds.WithLabelValues(k[0], k[1])
	}).Observe(d.Seconds())
}

// Search records one search_tools latency; via is "selector" or
// "fallback".
func Search(via string, d time.Duration) {
	searchSeconds.WithLabelValues(via).Observe(d.Seconds())
}

// PluginCall records one plugin gRPC call (or stream) and whether it
// failed.
func PluginCall(kind, plugin, method string, d time.Duration, failed bool) {
	k := triple{kind, plugin, method}
	pluginSecChild.get(k, func(k triple) prometheus.Observer {
		return pluginCallSeconds.WithLabelValues(k[0], k[1], k[2])
	}).Observe(d.Seconds())
	if failed {
		pluginErrChild.get(k, func(k triple) prometheus.Counter {
			return pluginCallErrors.WithLabelValues(k[0], k[1], k[2])
		}).Inc()
	}
}

// Detection counts n detections of one type.
func Detection(typ string, n int) {
	detectChildren.get(typ, func(t string) prometheus.Counter {
		return detections.WithLabelValues(t)
	}).Add(float64(n))
}

// Denial counts one refusal by tenant's policy or a guard; what is "code"
// or "tool_call".
func Denial(tenant, what string) {
	denialChildren.get(pair{tenant, what}, func(k pair) prometheus.Counter {
		return denials.WithLabelValues(k[0], k[1])
	}).Inc()
}

// MCPConnection moves the open MCP connections gauge by delta.
func MCPConnection(delta int) { mcpConnections.Add(float64(delta)) }

// MCPConnectionRefused counts a connection closed for being over a cap.
func MCPConnectionRefused() { mcpRefused.Inc() }

// AuditError counts an audit event that could not be written.
func AuditError(tenant string) {
	auditErrChildren.get(tenant, func(t string) prometheus.Counter {
		return auditErrors.WithLabelValues(t)
	}).Inc()
}

// Reload counts a config reload by result.
func Reload(result string) { reloads.WithLabelValues(result).Inc() }

// ForgetTenant drops a removed tenant's series, so tenant GC keeps the
// series count bounded too.
func ForgetTenant(tenant string) {
	executions.DeletePartialMatch(prometheus.Labels{"tenant": tenant})
	executionSeconds.DeletePartialMatch(prometheus.Labels{"tenant": tenant})
	denials.DeletePartialMatch(prometheus.Labels{"tenant": tenant})
	execChildren.forget(func(k pair) bool { return k[0] == tenant })
	execSecChildren.forget(func(k string) bool { return k == tenant })
	denialChildren.forget(func(k pair) bool { return k[0] == tenant })
}
