package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/core/pluginhost"
)

// metricsServer serves /metrics on the metrics block's listener.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
	log  hclog.Logger
}

// startMetrics serves /metrics when the config has a metrics block; nil
// without one. The daemon's state (pool, upstreams, plugins, quotas, MCP
// sessions) is read at scrape time.
func startMetrics(cfg *config.Config, svc *services, host *pluginhost.Host, face *mcpServer, log hclog.Logger) (*metricsServer, error) {
	if cfg.Metrics.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", cfg.Metrics.Listen, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStateCollector(metricSources(svc, host, face)))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	m := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second},
		done: make(chan struct{}),
		log:  log.Named("metrics"),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics listener stopped", "error", err)
		}
	}()
	m.log.Info("serving metrics", "listen", ln.Addr().String(), "path", "/metrics")
	return m, nil
}

func (m *metricsServer) stop(ctx context.Context) {
	if m == nil {
		return
	}
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close()
	}
	<-m.done
}

// metricSources reads the daemon's parts for the state collector.
func metricSources(svc *services, host *pluginhost.Host, face *mcpServer) metrics.Sources {
	src := metrics.Sources{
		Upstreams: func() []metrics.Component {
			var out []metrics.Component
			for _, s := range svc.catalog.Servers() {
				out = append(out, metrics.Component{Name: s.Name, State: string(s.State), Up: s.State == catalog.StateReady, Restarts: s.Restarts})
			}
			return out
		},
		Plugins: func() []metrics.Component {
			var out []metrics.Component
			for _, p := range host.Status() {
				out = append(out, metrics.Component{Kind: string(p.Kind), Name: p.Name, State: string(p.State),
					Up: p.State == pluginhost.StateOK, Restarts: p.Restarts})
			}
			return out
		},
		Quotas: func() []metrics.TenantUsage {
			var out []metrics.TenantUsage
			for _, u := range svc.workspace.LoadedUsage() {
				out = append(out, metrics.TenantUsage{Tenant: u.Tenant, Bytes: u.Bytes, Files: u.Files,
					QuotaBytes: u.QuotaBytes, QuotaMaxFiles: u.MaxFiles})
			}
			return out
		},
	}
	if face != nil && face.face != nil {
		src.MCPSessions = face.face.SessionsByTenant
	}
	if p := svc.pool; p != nil {
		src.Pool = func() metrics.PoolState {
			st := p.Stats()
			ps := metrics.PoolState{Idle: st.Idle, Busy: map[string]int{}, Creating: st.Creating, MaxTotal: st.MaxTotal}
			for _, sb := range st.Sandboxes {
				if sb.Leased {
					ps.Busy[sb.Tenant]++
				}
			}
			return ps
		}
	}
	return src
}
