package pluginhost

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
)

// Validate is the plugin half of `cexecd validate`: it launches every plugin
// configured in cfg, checks its Info, decodes its block against the schema
// the plugin declares, calls Configure and stops it again. The diagnostics
// are the ones Start would report (errors for required plugins, warnings for
// optional ones), so a config that validates also starts, except that
// binaries config.Load already reported as unusable are skipped rather than
// reported twice.
func Validate(ctx context.Context, cfg *config.Config, log hclog.Logger) hcl.Diagnostics {
	h := New(cfg, log)
	diags := h.start(ctx, false)
	h.Stop(ctx)
	return diags
}
