package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// TenantEnv names the environment variable with the default tenant of
// workspace commands.
const TenantEnv = "CEXEC_TENANT"

// DefaultTenant is the tenant of workspace commands given neither --tenant
// nor $CEXEC_TENANT; the daemon uses the same default.
const DefaultTenant = "default"

// AddTenantFlag registers --tenant on cmd and its subcommands, defaulting
// to $CEXEC_TENANT, else DefaultTenant.
func AddTenantFlag(cmd *cobra.Command, p *string) {
	def := os.Getenv(TenantEnv)
	if def == "" {
		def = DefaultTenant
	}
	cmd.PersistentFlags().StringVar(p, "tenant", def, "tenant whose workspace to use (default $"+TenantEnv+", else \""+DefaultTenant+"\")")
}

// Bytes renders a size for people: 512 B, 1.5 KiB, 3.0 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// UnixMs renders a time in Unix milliseconds as local RFC 3339 to the
// second, or "-" for zero (never).
func UnixMs(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format(time.RFC3339)
}
