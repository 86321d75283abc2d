package auth

import (
	"fmt"

	"github.com/cexec/cexec/api/endpoint"
)

// SignInRequiredError says that a tenant has no usable token for a server:
// nobody signed in, the token expired and could not be refreshed, the
// server refused it, or the server wants more scope. Its message tells the
// program's author how to sign in; an execution whose user can be shown a
// link offers one instead (core/pipeline's sign-in, through Manager.Login).
type SignInRequiredError struct {
	Server string
	Tenant string
	// Reason is why, in a few words.
	Reason string
	// Scope is the scope the server asked for in an insufficient_scope
	// challenge, if any.
	Scope string
}

func (e *SignInRequiredError) Error() string {
	return fmt.Sprintf("server %s needs a sign-in for tenant %s (%s); an operator signs in with: %s", e.Server, e.Tenant, e.Reason, e.Command())
}

// Command is the cexecctl command that signs the tenant in.
func (e *SignInRequiredError) Command() string {
	if e.Tenant == endpoint.DefaultTenant {
		return "cexecctl auth login " + e.Server
	}
	return "cexecctl auth login " + e.Server + " --tenant " + e.Tenant
}

// SignInRequired marks the error for packages that match it by behaviour
// (errors.As with an interface) rather than import this one.
func (e *SignInRequiredError) SignInRequired() (server, tenant string) { return e.Server, e.Tenant }
