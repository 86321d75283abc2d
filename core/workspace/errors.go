package workspace

import (
	"fmt"

	"github.com/cexec/cexec/pluginapi"
)

// Errors callers may test with errors.Is. Each wraps the pluginapi sentinel
// the control API maps to a gRPC code, so errors.Is(err,
// pluginapi.ErrResourceExhausted) holds for both quota errors.
var (
	// ErrQuotaExceeded: a write would exceed the tenant's disk quota, or the
	// workspace is over it after an execution.
	ErrQuotaExceeded = fmt.Errorf("disk quota exceeded: %w", pluginapi.ErrResourceExhausted)
	// ErrTooManyExecutions: the tenant already runs its max_concurrent
	// executions.
	ErrTooManyExecutions = fmt.Errorf("too many concurrent executions: %w", pluginapi.ErrResourceExhausted)
	// ErrTooLarge: a value is over a size limit (state file, checkpoint
	// context, skill code).
	ErrTooLarge = fmt.Errorf("too large: %w", pluginapi.ErrInvalidArgument)
	// ErrTenantRemoved: the tenant was garbage-collected after this handle
	// was obtained; Manager.Tenant returns a fresh one.
	ErrTenantRemoved = fmt.Errorf("tenant was removed by garbage collection: %w", pluginapi.ErrNotFound)
	// ErrNoTenant: Manager.Lookup of a tenant that is not declared and was
	// never used.
	ErrNoTenant = fmt.Errorf("not in cexec.hcl and never used: %w", pluginapi.ErrNotFound)

	errManagerClosed = fmt.Errorf("workspace manager is closed: %w", pluginapi.ErrUnavailable)
)
