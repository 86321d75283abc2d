package daemon

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

// guardHost gives supervised handles to guard plugins (pluginhost.Host).
type guardHost interface {
	Guard(name string) (guardapi.Guard, error)
}

// policyDiags decodes every tenant's policy block for its diagnostics
// (file:line), so `cexecd validate` and start-up refuse a bad policy before
// anything runs.
func policyDiags(cfg *config.Config) hcl.Diagnostics {
	policies, diags := policy.DecodeTenants(cfg)
	return append(diags, approvalWarnings(cfg, policies)...)
}

// startGuards builds the guard layer (ARCHITECTURE §3.1): the tenants'
// policies, the per-session PII vaults under data_dir and the guard plugins
// of pipeline.guards. A configured guard that is not running (a
// required = false plugin that failed to load) stands in as guard.Missing,
// so strict tenants fail closed, the others run code without its checks
// but get no model-facing output (unless pii_fail_open). It runs after the
// plugins started.
func (s *services) startGuards(host guardHost) error {
	cfg, log := s.cfg, s.log
	policies, diags := policy.DecodeTenants(cfg)
	if diags.HasErrors() {
		// Run reported these with their lines before starting anything;
		// this only guards against serving without the policies.
		return fmt.Errorf("decode tenant policies: %w", diags)
	}
	guards := make([]guard.Named, 0, len(cfg.Pipeline.Guards))
	for _, name := range cfg.Pipeline.Guards {
		g, err := host.Guard(name)
		if err != nil {
			log.Warn("guard plugin is not running: strict tenants fail closed, model-facing output is withheld", "guard", name, "error", err)
			guards = append(guards, guard.Named{Name: name, Plugin: guard.Missing(err)})
			continue
		}
		guards = append(guards, guard.Named{Name: name, Plugin: g})
	}
	var err error
	s.guards, err = guard.New(guard.Options{Guards: guards, Policies: policies, Vaults: s.vaults, Logger: log})
	if err != nil {
		return fmt.Errorf("build guardrails: %w", err)
	}
	return nil
}
