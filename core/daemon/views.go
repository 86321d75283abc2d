package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/pluginapi"
)

// pluginsView adapts the plugin host to control.Plugins.
type pluginsView struct{ host *pluginhost.Host }

// PluginStates reports the host's snapshot of every configured plugin.
func (v pluginsView) PluginStates() []control.PluginState {
	sts := v.host.Status()
	out := make([]control.PluginState, len(sts))
	for i, s := range sts {
		out[i] = control.PluginState{
			Kind:       string(s.Kind),
			Name:       s.Name,
			Version:    s.Version,
			APIVersion: s.APIVersion,
			Status:     string(s.State),
			Restarts:   s.Restarts,
			PID:        s.PID,
			LastError:  s.LastError,
			Required:   s.Required,
		}
	}
	return out
}

// Ping calls Info through the plugin's supervised handle.
func (v pluginsView) Ping(ctx context.Context, kind, name string) (pluginapi.Info, error) {
	p, err := v.host.Plugin(pluginapi.Kind(kind), name)
	if err != nil {
		return pluginapi.Info{}, err
	}
	return p.Info(ctx)
}

// schemaCache holds the config schemas the running plugins declared, keyed by
// config.PluginKey. They are what `config show` needs to mask a plugin's
// sensitive attributes and what `config check` decodes blocks against.
type schemaCache struct {
	mu      sync.Mutex
	schemas map[string]pluginapi.ConfigSchema
	// binaries maps the key to the binary the schema came from, so a
	// checked file naming another binary for the same plugin is not
	// decoded against the wrong schema.
	binaries map[string]string
}

// fill asks every running plugin for its Info in parallel.
func (c *schemaCache) fill(ctx context.Context, cfg *config.Config, host *pluginhost.Host, log hclog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.schemas = make(map[string]pluginapi.ConfigSchema)
	c.binaries = make(map[string]string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range cfg.Plugins {
		h, err := host.Plugin(p.Kind, p.Name)
		if err != nil {
			continue // failed optional plugin: nothing to ask
		}
		wg.Go(func() {
			info, err := h.Info(ctx)
			if err != nil {
				log.Warn("plugin did not describe its config schema", "plugin", p.Key(), "error", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			c.schemas[p.Key()] = info.ConfigSchema
			c.binaries[p.Key()] = p.ResolvedCommand()
		})
	}
	wg.Wait()
}

// get returns the schema of the running plugin with p's key if p names the
// same binary.
func (c *schemaCache) get(p *config.Plugin) (pluginapi.ConfigSchema, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.schemas[p.Key()]
	if !ok || c.binaries[p.Key()] != p.ResolvedCommand() {
		return pluginapi.ConfigSchema{}, false
	}
	return s, true
}

// all returns a copy of every known schema.
func (c *schemaCache) all() map[string]pluginapi.ConfigSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]pluginapi.ConfigSchema, len(c.schemas))
	for k, v := range c.schemas {
		out[k] = v
	}
	return out
}

// configView adapts the daemon's config to control.Config.
type configView struct {
	// current is the config in effect: the reloaded one after a SIGHUP.
	current func() *config.Config
	ov      config.Overrides
	schemas *schemaCache
	log     hclog.Logger
}

// Path is the config file the daemon runs on.
func (v *configView) Path() string { return v.current().Path }

// MaskedJSON shows the config with env() values, plugin env and the
// plugins' own sensitive attributes masked.
func (v *configView) MaskedJSON() ([]byte, error) {
	return v.current().MaskedJSONWithSchemas(v.schemas.all())
}

// Check loads the file at path (the daemon's own when "") with the daemon's
// overrides and decodes each plugin block against the schema its running
// plugin declared. Plugins this daemon does not run (another name, another
// binary) are launched once to validate them, as `cexecd validate` does;
// the daemon's own running plugins are never relaunched or reconfigured.
func (v *configView) Check(ctx context.Context, path string) (string, hcl.Diagnostics) {
	if path == "" {
		path = v.current().Path
	}
	if path == "" {
		return "", hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "No config file",
			Detail: "cexecd runs on built-in defaults; there is no file to check."}}
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	cfg, diags := config.Load(path, v.ov)
	if cfg == nil {
		return path, diags
	}
	var unknown []*config.Plugin
	for _, p := range cfg.Plugins {
		if p.ResolvedCommand() == "" {
			continue // Load already said why the binary is unusable
		}
		if s, ok := v.schemas.get(p); ok {
			_, d := config.DecodePluginBody(p, s)
			diags = append(diags, d...)
			continue
		}
		unknown = append(unknown, p)
	}
	if len(unknown) > 0 {
		sub := *cfg
		sub.Plugins = unknown
		diags = append(diags, pluginhost.Validate(ctx, &sub, v.log.Named("check"))...)
		v.log.Debug("validated plugins the daemon does not run", "config", path, "plugins", len(unknown))
	}
	return path, dedupe(diags)
}

// dedupe drops repeated diagnostics (Load and Validate both check binaries).
func dedupe(diags hcl.Diagnostics) hcl.Diagnostics {
	seen := make(map[string]bool, len(diags))
	out := diags[:0:0]
	for _, d := range diags {
		k := fmt.Sprintf("%d|%s|%s|%v", d.Severity, d.Summary, d.Detail, d.Subject)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}
