package daemon

import (
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard/policy"
)

// approvalWarnings points at approval timeouts set longer than an
// execution may run: the program waits for the approval inside its own
// timeout, so the longer wait never happens. (The default timeout is for
// the MCP face's call_tool, which has no sandbox timeout.)
func approvalWarnings(cfg *config.Config, policies map[string]*policy.Policy) hcl.Diagnostics {
	limit := cfg.Sandbox.Limits.Timeout
	if limit <= 0 {
		return nil
	}
	tenants := make([]string, 0, len(policies))
	for t := range policies {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	var diags hcl.Diagnostics
	for _, t := range tenants {
		for _, a := range policies[t].Approvals {
			if a.TimeoutRange == nil || a.Timeout <= limit {
				continue
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Approval outlasts the execution",
				Detail: fmt.Sprintf("this approval waits up to %s, but an execution ends after sandbox.limits.timeout (%s), and the call with it; "+
					"raise the sandbox timeout or shorten this one.", a.Timeout, limit),
				Subject: a.TimeoutRange})
		}
	}
	return diags
}
