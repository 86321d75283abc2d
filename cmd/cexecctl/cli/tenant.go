package cli

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cexec/cexec/api/endpoint"
)

// TenantFlag registers --tenant on fs, the same on every command that acts
// as a tenant: $CEXEC_TENANT, else the daemon's default tenant.
func TenantFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "tenant", endpoint.Tenant(), "tenant to act as; $"+endpoint.TenantEnv+" sets the default")
}

// TenantChosen reports whether the user named the tenant of cmd, with
// --tenant or $CEXEC_TENANT, rather than leaving it to the default. Over
// the MCP face's TCP endpoint an unnamed tenant is the bearer token's.
func TenantChosen(cmd *cobra.Command) bool {
	f := cmd.Flag("tenant")
	return f != nil && f.Changed || os.Getenv(endpoint.TenantEnv) != ""
}
