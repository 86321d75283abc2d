package config

import (
	"testing"
)

// TestMetricsAndAuditBlocks: no metrics block is no listener; a block
// without listen serves on loopback; the audit block's defaults hold
// without it.
func TestMetricsAndAuditBlocks(t *testing.T) {
	env := fakeEnv(map[string]string{"HOME": "/home/test"})
	tests := []struct {
		name, src string
		listen    string
		rotate    int64
		keep      int
	}{
		{"absent", ``, "", DefaultAuditRotateSize, DefaultAuditKeep},
		{"default listen", "metrics {}\n", DefaultMetricsListen, DefaultAuditRotateSize, DefaultAuditKeep},
		{"own listen", "metrics {\n  listen = \"127.0.0.1:19464\"\n}\n", "127.0.0.1:19464", DefaultAuditRotateSize, DefaultAuditKeep},
		{"off", "metrics {\n  listen = \"\"\n}\n", "", DefaultAuditRotateSize, DefaultAuditKeep},
		{"audit", "audit {\n  rotate_size = \"1MiB\"\n  keep = 2\n}\n", "", 1 << 20, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := load([]byte(tt.src), "/etc/cexec/cexec.hcl", Overrides{LookupEnv: env})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if cfg.Metrics.Listen != tt.listen {
				t.Errorf("metrics listen %q, want %q", cfg.Metrics.Listen, tt.listen)
			}
			if cfg.Audit.RotateSize != tt.rotate || cfg.Audit.Keep != tt.keep {
				t.Errorf("audit %+v, want rotate %d keep %d", cfg.Audit, tt.rotate, tt.keep)
			}
		})
	}
}
