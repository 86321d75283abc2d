package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func scrape(t *testing.T, extra prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(extra).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestSeries: what the packages record and what the state collector reads
// come out in the text format with their labels; a forgotten tenant's
// series go.
func TestSeries(t *testing.T) {
	Execution("acme", OutcomeOK, 30*time.Millisecond)
	Execution("acme", OutcomeOK, 40*time.Millisecond)
	ToolCall("memory", "read_graph", OutcomeDenied, time.Millisecond)
	Detection("EMAIL", 3)
	Denial("acme", "tool_call")
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStateCollector(Sources{
		Pool: func() PoolState {
			return PoolState{Idle: map[string]int{"acme": 2}, Busy: map[string]int{"acme": 1}, MaxTotal: 16}
		},
		Upstreams: func() []Component { return []Component{{Name: "memory", State: "ready", Up: true, Restarts: 2}} },
		Plugins:   func() []Component { return []Component{{Kind: "guard", Name: "pii", State: "restarting", Restarts: 1}} },
		Quotas: func() []TenantUsage {
			return []TenantUsage{{Tenant: "acme", Bytes: 4096, Files: -1, QuotaBytes: 1 << 30}}
		},
		MCPSessions: func() map[string]int { return map[string]int{"acme": 3} },
	}))
	body := scrape(t, reg)
	for _, want := range []string{
		`cexec_executions_total{outcome="ok",tenant="acme"} 2`,
		`cexec_execution_duration_seconds_count{tenant="acme"} 2`,
		`cexec_tool_calls_total{outcome="denied",server="memory",tool="read_graph"} 1`,
		`cexec_guard_detections_total{type="EMAIL"} 3`,
		`cexec_policy_denials_total{tenant="acme",what="tool_call"} 1`,
		`cexec_pool_sandboxes{state="idle",tenant="acme"} 2`,
		`cexec_pool_sandboxes{state="busy",tenant="acme"} 1`,
		`cexec_upstream_up{server="memory"} 1`,
		`cexec_upstream_restarts_total{server="memory"} 2`,
		`cexec_plugin_up{kind="guard",plugin="pii"} 0`,
		`cexec_plugin_state{kind="guard",plugin="pii",state="restarting"} 1`,
		`cexec_tenant_disk_used_bytes{tenant="acme"} 4096`,
		`cexec_mcp_sessions{tenant="acme"} 3`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(body, `cexec_tenant_files{tenant="acme"}`) {
		t.Error("an unknown file count (-1) was exported")
	}
	ForgetTenant("acme")
	body = scrape(t, nil)
	if strings.Contains(body, `tenant="acme"`) {
		t.Error("a forgotten tenant's series remain")
	}
	Execution("acme", OutcomeOK, time.Millisecond)
	if body = scrape(t, nil); !strings.Contains(body, `cexec_executions_total{outcome="ok",tenant="acme"} 1`) {
		t.Error("a tenant's series do not come back after ForgetTenant")
	}
}

// BenchmarkHotPath is what an execution with one tool call adds.
func BenchmarkHotPath(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Execution("bench", OutcomeOK, time.Millisecond)
		ToolCall("memory", "read_graph", OutcomeOK, time.Millisecond)
	}
}

// TestLint: every series passes Prometheus' own naming rules (promtool
// check metrics), so dashboards and rate() suggestions treat them right.
func TestLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStateCollector(Sources{
		Pool: func() PoolState { return PoolState{Idle: map[string]int{"lint": 1}, MaxTotal: 16} },
	}))
	mfs, err := prometheus.Gatherers{registry, reg}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "cexec_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}
