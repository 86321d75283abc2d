package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/metrics"
)

// reloader applies the config file again on SIGHUP, where that is safe:
// upstream servers added, removed or changed (shared ones), and the
// tenants' policies. Everything else it finds changed is logged as needing
// a restart and keeps its running value. A config with errors is not
// applied at all: its diagnostics are logged and the daemon runs on.
type reloader struct {
	o   *Options
	svc *services
	log hclog.Logger
	cur atomic.Pointer[config.Config]
}

func newReloader(o *Options, cfg *config.Config, svc *services, log hclog.Logger) *reloader {
	r := &reloader{o: o, svc: svc, log: log.Named("reload")}
	r.cur.Store(cfg)
	return r
}

// config is the config in effect (the last one applied).
func (r *reloader) config() *config.Config { return r.cur.Load() }

// notifyHUP catches SIGHUP from the start of Run, whose default action
// would end the daemon; one that comes during start-up is applied once the
// daemon serves. Call signal.Stop on the channel when Run returns.
func notifyHUP() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch
}

// watch reloads on every signal on ch until ctx ends. Call the returned
// stop.
func (r *reloader) watch(ctx context.Context, ch chan os.Signal) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				r.reload(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Results of a reload (cexec_config_reloads_total's result label).
const (
	reloadApplied = "applied"
	reloadInvalid = "invalid"
)

// reload reads the file again and applies what it can.
func (r *reloader) reload(ctx context.Context) {
	old := r.config()
	r.log.Info("SIGHUP: reloading config", "file", old.Path)
	next, diags, err := loadConfig(r.o, r.log)
	if err == nil && next != nil {
		diags = append(diags, policyDiags(next)...)
	}
	if err != nil || next == nil || diags.HasErrors() {
		r.refuse(ctx, next, diags, err)
		return
	}
	var applied, restart []string
	cr := r.svc.catalog.Reconfigure(next)
	r.svc.auth.SetConfig(next)
	for _, n := range cr.Added {
		applied = append(applied, "mcp_server "+n+" added")
	}
	for _, n := range cr.Removed {
		applied = append(applied, "mcp_server "+n+" removed")
	}
	for _, n := range cr.Changed {
		applied = append(applied, "mcp_server "+n+" changed")
	}
	for n, why := range cr.Kept {
		restart = append(restart, "mcp_server "+n+": "+why)
	}
	waiting, err := r.svc.workspace.SetTenants(next.Tenants)
	if err != nil {
		r.refuse(ctx, next, nil, err)
		return
	}
	applied = append(applied, tenantChanges(old, next, waiting)...)
	for _, id := range waiting {
		restart = append(restart, "tenant "+id+": disk_quota or max_files (its file system image keeps its size)")
	}
	if r.svc.guards != nil {
		policies, _ := policy.DecodeTenants(next)
		r.svc.guards.SetPolicies(policies)
		// The old config decoded without errors when it was applied.
		before, _ := policy.DecodeTenants(old)
		applied = append(applied, policyChanges(before, policies)...)
	}
	restart = append(restart, sectionsChanged(old, next)...)
	slices.Sort(restart)
	// What needs a restart keeps its old value, so the config in effect is
	// the new one only as far as applied; tools and policies read theirs
	// from the catalog and the guard layer.
	r.cur.Store(next)
	if len(applied) == 0 && len(restart) == 0 {
		r.log.Info("config reload: nothing changed")
	}
	for _, a := range applied {
		r.log.Info("config reload applied", "change", a)
	}
	for _, w := range restart {
		r.log.Warn("config reload: changed, but takes effect only after a restart", "change", w)
	}
	metrics.Reload(reloadApplied)
	ev := audit.Event{Type: audit.TypeConfigReload, Actor: "operator", Outcome: reloadApplied,
		Reason: strings.Join(applied, "; "), Detail: map[string]string{"file": next.Path, "needs_restart": strings.Join(restart, "; ")}}
	_ = r.svc.audit.Record(ctx, "", ev)
	// Each open tenant's log says so too: its policy may have changed.
	for _, t := range r.svc.workspace.Loaded() {
		_ = r.svc.audit.Record(ctx, t, ev)
	}
}

// refuse logs why a reloaded config is not applied; the daemon runs on
// with the one it has.
func (r *reloader) refuse(ctx context.Context, cfg *config.Config, diags hcl.Diagnostics, err error) {
	var b bytes.Buffer
	if err != nil {
		b.WriteString(err.Error())
	}
	var files map[string]*hcl.File
	if cfg != nil {
		files = cfg.Files()
	}
	_ = config.FormatDiagnostics(&b, diags, files)
	r.log.Error("config reload refused: the file has errors; still running on the previous config", "diagnostics", strings.TrimSpace(b.String()))
	metrics.Reload(reloadInvalid)
	_ = r.svc.audit.Record(ctx, "", audit.Event{Type: audit.TypeConfigReload, Actor: "operator", Outcome: reloadInvalid,
		Reason: countDiags(diags)})
}

// sectionsChanged names the parts of the config other than upstreams,
// tenant limits and policies that differ: those need a restart. It compares the masked views
// (so a changed secret goes unseen; restart after rotating one).
func sectionsChanged(old, next *config.Config) []string {
	a, b := viewOf(old), viewOf(next)
	var out []string
	for k := range b {
		if k == "path" || k == "mcp_servers" || k == "tenants" {
			continue
		}
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k+" block")
		}
	}
	if !reflect.DeepEqual(tenantOverrides(a["tenants"]), tenantOverrides(b["tenants"])) {
		out = append(out, "tenant mcp_server overrides")
	}
	return out
}

func viewOf(c *config.Config) map[string]any {
	raw, err := c.MaskedJSON()
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

// tenantOverrides maps each tenant block's id to its mcp_server overrides:
// the one part of a tenant block a reload does not apply (policies go to
// the guard layer, limits to SetTenants).
func tenantOverrides(v any) map[string]any {
	out := map[string]any{}
	l, _ := v.([]any)
	for _, t := range l {
		if m, ok := t.(map[string]any); ok && m["mcp_servers"] != nil {
			out[fmt.Sprint(m["id"])] = m["mcp_servers"]
		}
	}
	return out
}

// tenantChanges names the tenant blocks next adds or removes and the
// limits it changes, tenant by tenant. A disk limit an open tenant keeps
// until a restart (waiting) is not among them.
func tenantChanges(old, next *config.Config, waiting []string) []string {
	var ids []string
	for _, t := range slices.Concat(old.Tenants, next.Tenants) {
		ids = append(ids, t.ID)
	}
	slices.Sort(ids)
	var out []string
	for _, id := range slices.Compact(ids) {
		a, b := old.Tenant(id), next.Tenant(id)
		switch {
		case a == nil:
			out = append(out, "tenant block "+id+" added")
			a = &config.Tenant{}
		case b == nil:
			out = append(out, "tenant block "+id+" removed")
			b = &config.Tenant{}
		}
		var what []string
		if a.MaxConcurrent != b.MaxConcurrent {
			what = append(what, "max_concurrent")
		}
		// nil allows every server, an empty list none.
		if (a.AllowedServers == nil) != (b.AllowedServers == nil) || !slices.Equal(a.AllowedServers, b.AllowedServers) {
			what = append(what, "allowed_servers")
		}
		if a.MaxSessionLog != b.MaxSessionLog {
			what = append(what, "max_session_log")
		}
		if a.SessionTTL != b.SessionTTL {
			what = append(what, "session_ttl")
		}
		if !slices.Contains(waiting, id) {
			if a.DiskQuota != b.DiskQuota {
				what = append(what, "disk_quota")
			}
			if a.MaxFiles != b.MaxFiles {
				what = append(what, "max_files")
			}
		}
		if len(what) > 0 {
			out = append(out, "tenant limits of "+id+": "+strings.Join(what, ", "))
		}
	}
	return out
}

// policyChanges names the tenants whose policy next adds, removes or
// changes.
func policyChanges(old, next map[string]*policy.Policy) []string {
	ids := slices.AppendSeq(slices.Collect(maps.Keys(old)), maps.Keys(next))
	slices.Sort(ids)
	var out []string
	for _, id := range slices.Compact(ids) {
		if policyView(old[id]) != policyView(next[id]) {
			out = append(out, "tenant policy of "+id)
		}
	}
	return out
}

// policyView is p as JSON without its places in the file, which move when
// lines above the policy change. No policy is the empty one, as the guard
// layer takes it.
func policyView(p *policy.Policy) string {
	if p == nil {
		p = &policy.Policy{}
	}
	q := *p
	q.Constraints, q.Approvals = nil, nil
	for _, c := range p.Constraints {
		c := *c
		c.DeclRange = hcl.Range{}
		q.Constraints = append(q.Constraints, &c)
	}
	for _, a := range p.Approvals {
		a := *a
		a.Range, a.TimeoutRange = hcl.Range{}, nil
		q.Approvals = append(q.Approvals, &a)
	}
	b, err := json.Marshal(q)
	if err != nil {
		// Not comparable: count it changed.
		return fmt.Sprintf("%p", p)
	}
	return string(b)
}
