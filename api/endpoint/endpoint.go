// Package endpoint holds what cexecd and its clients must agree on to find
// each other: where the control and MCP sockets are, the environment
// variables that move them, the default tenant, and the paths and header of
// the MCP face. It imports only the standard library, so clients that use it
// carry none of the daemon's dependencies.
//
// The daemon serves the same MCP endpoints on two kinds of listener:
//
//   - a unix socket next to the control socket (MCPSocket), private to the
//     daemon's user like the control socket; requests choose their tenant
//     with the TenantHeader header. `cexecctl mcp` relays stdio to it.
//   - optionally a TCP address (cexec.hcl: mcp { listen = ... }), where a
//     bearer token decides the tenant.
//
// On both, the streamable HTTP endpoint is MCPPath, and with SSE enabled the
// legacy HTTP+SSE endpoints are SSEPath and MessagePath.
package endpoint

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Environment variables read by the daemon and its clients.
const (
	// SocketEnv moves the control socket: cexecd listens there and
	// cexecctl and the client SDK dial it.
	SocketEnv = "CEXEC_SOCKET"
	// AddressEnv is the clients' older name for the daemon's address. It
	// still wins over SocketEnv when set, so setups that use it keep
	// dialing where they did.
	AddressEnv = "CEXECD_ADDRESS"
	// TenantEnv is the tenant clients act as when no flag names one.
	TenantEnv = "CEXEC_TENANT"
	// TokenEnv is the bearer token clients send to a remote MCP face.
	TokenEnv = "CEXEC_MCP_TOKEN"
)

// DefaultTenant is the tenant of requests that name none.
const DefaultTenant = "default"

// Paths of the MCP endpoints.
const (
	// MCPPath serves streamable HTTP.
	MCPPath = "/mcp"
	// SSEPath opens an HTTP+SSE stream (protocol 2024-11-05 clients).
	SSEPath = "/sse"
	// MessagePath receives the messages of an HTTP+SSE session.
	MessagePath = "/message"
)

// TenantHeader names the tenant of a request on the unix socket. Over TCP
// the bearer token decides the tenant and the header, if sent, must agree.
const TenantHeader = "X-Cexec-Tenant"

// UnixBaseURL is the base URL of requests sent over the MCP unix socket;
// the host part is never resolved.
const UnixBaseURL = "http://cexecd"

// DefaultSocket is where cexecd listens and clients look when neither the
// config, a flag nor the environment says otherwise:
// $XDG_RUNTIME_DIR/cexec/cexecd.sock, or /tmp/cexec-<uid>/cexecd.sock
// without XDG_RUNTIME_DIR.
func DefaultSocket() string {
	return DefaultSocketFrom(os.LookupEnv)
}

// DefaultSocketFrom is DefaultSocket reading the environment through
// lookup, for callers (the config loader, tests) that inject it.
func DefaultSocketFrom(lookup func(string) (string, bool)) string {
	if dir, ok := lookup("XDG_RUNTIME_DIR"); ok && dir != "" {
		return filepath.Join(dir, "cexec", "cexecd.sock")
	}
	return filepath.Join(os.TempDir(), "cexec-"+strconv.Itoa(os.Getuid()), "cexecd.sock")
}

// Address is the daemon address clients dial when given none:
// $CEXECD_ADDRESS, else $CEXEC_SOCKET, else DefaultSocket.
func Address() string {
	for _, key := range []string{AddressEnv, SocketEnv} {
		if a := os.Getenv(key); a != "" {
			return a
		}
	}
	return DefaultSocket()
}

// Tenant is the tenant clients act as when no flag names one:
// $CEXEC_TENANT, else DefaultTenant.
func Tenant() string {
	if t := os.Getenv(TenantEnv); t != "" {
		return t
	}
	return DefaultTenant
}

// MCPSocket is where a daemon whose control socket is controlSocket serves
// MCP: the same directory (private to the daemon's user), the same name with
// "-mcp" added, so daemons sharing a directory do not collide:
// /run/user/1000/cexec/cexecd.sock → /run/user/1000/cexec/cexecd-mcp.sock.
func MCPSocket(controlSocket string) string {
	dir, base := filepath.Split(controlSocket)
	return filepath.Join(dir, strings.TrimSuffix(base, ".sock")+"-mcp.sock")
}
