package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefaults(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		env        map[string]string
		ov         Overrides
		wantSocket string
		wantData   string
		wantErr    bool
	}{
		{"xdg", map[string]string{"XDG_RUNTIME_DIR": "/run/u", "HOME": "/home/u"}, Overrides{},
			"/run/u/cexec/cexecd.sock", "/home/u/.local/share/cexec", false},
		{"env and flag", map[string]string{"HOME": "/home/u", EnvSocket: "/e/s.sock", EnvDataDir: "/e/data"}, Overrides{DataDir: "/f/data"},
			"/e/s.sock", "/f/data", false},
		{"no data dir", map[string]string{"XDG_RUNTIME_DIR": "/run/u"}, Overrides{}, "/run/u/cexec/cexecd.sock", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ov := tt.ov
			ov.LookupEnv = func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			cfg, diags := Defaults(ov)
			if diags.HasErrors() != tt.wantErr {
				t.Fatalf("diags = %v, want errors %v", diags, tt.wantErr)
			}
			if cfg.Path != "" || len(cfg.Plugins) != 0 {
				t.Errorf("path %q, %d plugins; want none", cfg.Path, len(cfg.Plugins))
			}
			if cfg.Daemon.Socket != tt.wantSocket || (!tt.wantErr && cfg.Daemon.DataDir != tt.wantData) {
				t.Errorf("socket %q data %q, want %q %q", cfg.Daemon.Socket, cfg.Daemon.DataDir, tt.wantSocket, tt.wantData)
			}
			if cfg.Daemon.PluginDir != filepath.Join(cwd, "bin") || cfg.Daemon.LogLevel != "info" {
				t.Errorf("plugin dir %q level %q", cfg.Daemon.PluginDir, cfg.Daemon.LogLevel)
			}
		})
	}
}
