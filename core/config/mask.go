package config

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/pluginapi"
)

// MaskedJSON is the effective config as indented JSON with every secret
// replaced by "(sensitive)": values that came from env(), all plugin env
// values and all mcp tokens. Plugin-specific bodies are not shown, since
// without the plugin's schema nothing tells which of their values are
// secret; use MaskedJSONWithSchemas when the schemas are known.
func (c *Config) MaskedJSON() ([]byte, error) {
	return c.MaskedJSONWithSchemas(nil)
}

// MaskedJSONWithSchemas is MaskedJSON that also shows each plugin's decoded
// body when schemas (keyed by Plugin.Key) holds its schema, with the
// schema's Sensitive attributes masked.
func (c *Config) MaskedJSONWithSchemas(schemas map[string]pluginapi.ConfigSchema) ([]byte, error) {
	masks := append([][]string(nil), c.sensitive...)
	plugins, pluginMasks := c.pluginViews(schemas)
	masks = append(masks, pluginMasks...)
	root := c.view(plugins)

	// A round trip through JSON turns every typed slice and map into
	// []any and map[string]any, so masking can walk one shape.
	b, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, err
	}
	for _, m := range masks {
		tree = maskPath(tree, m)
	}
	return json.MarshalIndent(tree, "", "  ")
}

// pluginViews shows each plugin block, its config decoded with the schema
// the plugin declared; masks are the paths of the config's sensitive
// attributes.
func (c *Config) pluginViews(schemas map[string]pluginapi.ConfigSchema) (_ []any, masks [][]string) {
	plugins := make([]any, len(c.Plugins))
	for i, p := range c.Plugins {
		idx := strconv.Itoa(i)
		env := map[string]any{}
		for k := range p.Env {
			env[k] = maskedValue
		}
		view := map[string]any{
			"kind":             p.Kind,
			"name":             p.Name,
			"command":          p.Command,
			"resolved_command": p.resolved,
			"args":             nonNil(p.Args),
			"sha256":           p.SHA256,
			"required":         p.Required,
			"timeout":          p.Timeout.String(),
			"env":              env,
		}
		if s, ok := schemas[p.Key()]; ok {
			body, sensitive, diags := decodePluginBody(p, s)
			if diags.HasErrors() {
				view["config"] = "(invalid: " + diagSummaries(diags) + ")"
			} else {
				view["config"] = body
				for _, sp := range sensitive {
					masks = append(masks, append([]string{"plugins", idx, "config"}, sp...))
				}
			}
		} else if !emptyBody(p.Body) {
			view["config"] = "(not shown: the plugin's schema is not known)"
		}
		plugins[i] = view
	}
	return plugins, masks
}

// view is the whole config as shown, before masking.
func (c *Config) view(plugins []any) map[string]any {
	servers := make([]any, len(c.MCPServers))
	for i, s := range c.MCPServers {
		servers[i] = map[string]any{
			"name": s.Name, "command": s.Command, "args": nonNil(s.Args), "env": nonNilMap(s.Env),
			"cwd": s.Cwd, "url": s.URL, "transport": s.Transport, "headers": nonNilMap(s.Headers),
			"optional": s.Optional, "timeout": s.Timeout.String(),
			"max_argument_size": s.MaxArgumentSize, "max_result_size": s.MaxResultSize,
			"scope": s.Scope,
		}
		if s.Scope == ScopeTenant {
			v := servers[i].(map[string]any)
			v["idle_timeout"], v["max_instances"] = s.IdleTimeout.String(), s.MaxInstances
		}
	}
	tenants := make([]any, len(c.Tenants))
	for i, t := range c.Tenants {
		tenants[i] = map[string]any{
			"id": t.ID, "disk_quota": t.DiskQuota, "max_files": t.MaxFiles, "max_concurrent": t.MaxConcurrent, "max_session_log": t.MaxSessionLog, "session_ttl": t.SessionTTL.String(),
			"allowed_servers": t.AllowedServers, "policy": t.Policy != nil,
		}
		if len(t.Servers) > 0 {
			overrides := map[string]any{}
			for name, o := range t.Servers {
				overrides[name] = map[string]any{"env": nonNilMap(o.Env), "headers": nonNilMap(o.Headers)}
			}
			tenants[i].(map[string]any)["mcp_servers"] = overrides
		}
	}
	// Tokens are secrets even when written in the file.
	tokens := make([]any, len(c.MCP.Tokens))
	for i, t := range c.MCP.Tokens {
		tokens[i] = map[string]any{"token": maskedValue, "tenant": t.Tenant}
	}
	var oauth any
	if o := c.MCP.OAuth; o != nil {
		oauth = map[string]any{
			"issuer": o.Issuer, "jwks_url": o.JWKSURL, "audience": o.Audience,
			"tenant_claim": o.TenantClaim, "required_scopes": nonNil(o.RequiredScopes),
		}
	}
	sb := c.Sandbox
	return map[string]any{
		"path": c.Path,
		"cexec": map[string]any{
			"data_dir": c.Daemon.DataDir, "socket": c.Daemon.Socket,
			"log_level": c.Daemon.LogLevel, "plugin_dir": c.Daemon.PluginDir,
			"servers_dir": c.Daemon.ServersDir, "skills_dir": c.Daemon.SkillsDir,
			"sync": c.Daemon.Sync, "tenant_uids": idRangeText(c.Daemon.TenantUIDs),
			"disk_quota": c.Daemon.DiskQuota, "max_files": c.Daemon.MaxFiles,
			"replica": c.Daemon.Replica,
		},
		"store":   c.Store.view(),
		"plugins": plugins,
		"pipeline": map[string]any{
			"selector": c.Pipeline.Selector, "codegen": nonNil(c.Pipeline.Codegen),
			"guards": nonNil(c.Pipeline.Guards), "max_repairs": c.Pipeline.MaxRepairs,
			"search_limit": c.Pipeline.SearchLimit, "max_inline_attachment": c.Pipeline.MaxInlineAttachment,
		},
		"sandbox": map[string]any{
			"backend": sb.Backend, "network": sb.Network,
			"pool": map[string]any{
				"warm": sb.Pool.Warm, "max_total": sb.Pool.MaxTotal,
				"idle_timeout": sb.Pool.IdleTimeout.String(), "max_uses": sb.Pool.MaxUses,
				"queue_timeout": sb.Pool.QueueTimeout.String(),
			},
			"limits": map[string]any{
				"memory": sb.Limits.Memory, "pids": sb.Limits.PIDs, "timeout": sb.Limits.Timeout.String(),
				"output": sb.Limits.Output, "tmp": sb.Limits.Tmp, "shm": sb.Limits.Shm, "max_file_size": sb.Limits.MaxFileSize,
				"max_argument_size": sb.Limits.MaxArgumentSize, "max_result_size": sb.Limits.MaxResultSize,
			},
		},
		"mcp_servers": servers,
		"tenants":     tenants,
		"mcp": map[string]any{
			"listen": c.MCP.Listen, "tokens": tokens,
			"allowed_origins": nonNil(c.MCP.AllowedOrigins), "sse": c.MCP.SSE,
			"max_sessions_per_tenant": c.MCP.MaxSessionsPerTenant, "session_idle_timeout": c.MCP.SessionIdleTimeout.String(),
			"oauth": oauth,
		},
		"metrics":   map[string]any{"listen": c.Metrics.Listen},
		"audit":     map[string]any{"rotate_size": c.Audit.RotateSize, "keep": c.Audit.Keep},
		"telemetry": c.maskedTelemetry(),
	}
}

// maskPath replaces the value at p inside v, if it exists.
func maskPath(v any, p []string) any {
	if len(p) == 0 {
		return maskedValue
	}
	switch x := v.(type) {
	case map[string]any:
		if child, ok := x[p[0]]; ok {
			x[p[0]] = maskPath(child, p[1:])
		}
	case []any:
		if i, err := strconv.Atoi(p[0]); err == nil && i >= 0 && i < len(x) {
			x[i] = maskPath(x[i], p[1:])
		}
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func emptyBody(b hcl.Body) bool {
	if b == nil {
		return true
	}
	attrs, diags := b.JustAttributes()
	return len(attrs) == 0 && !diags.HasErrors()
}

func diagSummaries(diags hcl.Diagnostics) string {
	s := ""
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if s != "" {
			s += "; "
		}
		s += d.Summary
		if d.Subject != nil {
			s += " at " + d.Subject.String()
		}
	}
	return s
}

// idRangeText is r as cexec.hcl writes it, or "" when unset.
func idRangeText(r *IDRange) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}
