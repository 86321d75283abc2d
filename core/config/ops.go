package config

import (
	"net"
	"strconv"

	"github.com/hashicorp/hcl/v2"
)

// DefaultMetricsListen is where the metrics block serves /metrics when it
// sets no listen: loopback only.
const DefaultMetricsListen = "127.0.0.1:9464"

// Defaults of the audit block.
const (
	DefaultAuditRotateSize = 16 << 20
	DefaultAuditKeep       = 8
)

// Metrics is the `metrics { ... }` block. Without the block there is no
// metrics listener.
type Metrics struct {
	// Listen is the host:port /metrics is served on; "" is off.
	Listen    string
	DeclRange hcl.Range
}

// Audit is the `audit { ... }` block; the audit log is always written,
// the block only sizes it.
type Audit struct {
	// RotateSize is the size at which a log file is rotated.
	RotateSize int64
	// Keep is how many rotated files are kept besides the current one.
	Keep int
}

func (d *decoder) metrics(cfg *Config, raw *rawMetrics) {
	if raw == nil {
		return
	}
	m := &cfg.Metrics
	m.DeclRange = raw.DeclRange
	m.Listen = DefaultMetricsListen
	subject := raw.DeclRange.Ptr()
	if s, _, ok := d.str(raw.Listen, path("metrics", "listen")); ok {
		m.Listen, subject = s, raw.Listen.Expr.Range().Ptr()
	}
	if m.Listen == "" {
		return
	}
	host, port, err := net.SplitHostPort(m.Listen)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = net.InvalidAddrError("bad port")
		}
	}
	if err != nil {
		d.errorf(subject, "Invalid listen address", "metrics listen must be host:port, like %q; got %q.", DefaultMetricsListen, m.Listen)
		m.Listen = ""
		return
	}
	if !loopbackHost(host) {
		d.warnf(subject, "Metrics reachable from other machines",
			"listen = %q serves /metrics, which names tenants, servers and tools, without authentication to other machines; listen on 127.0.0.1 and let Prometheus reach it through a proxy or firewall you control.", m.Listen)
	}
}

func (d *decoder) audit(cfg *Config, raw *rawAudit) {
	a := &cfg.Audit
	a.RotateSize, a.Keep = DefaultAuditRotateSize, DefaultAuditKeep
	if raw == nil {
		return
	}
	if n, ok := d.size(raw.RotateSize, path("audit", "rotate_size")); ok {
		if n < 4096 {
			d.errorf(raw.RotateSize.Expr.Range().Ptr(), "Invalid size", "audit rotate_size must be at least 4KiB; got %d bytes.", n)
		} else {
			a.RotateSize = n
		}
	}
	if n, ok := d.integer(raw.Keep, path("audit", "keep"), 0); ok {
		a.Keep = n
	}
}
