// Package mcpclient holds what clients of cexecd's MCP face share with it:
// where the daemon serves MCP, the tenant header, an http.Client for the
// private unix socket, and the execute_code latency benchmark that `cexecctl
// bench mcp` runs.
//
// The daemon serves the same MCP endpoints on two kinds of listener:
//
//   - a unix socket next to the control socket (SocketPath), private to the
//     daemon's user like the control socket; requests choose their tenant
//     with the TenantHeader header. `cexecctl mcp` relays stdio to it.
//   - optionally a TCP address (cexec.hcl: mcp { listen = ... }), where a
//     bearer token decides the tenant.
//
// On both, the streamable HTTP endpoint is EndpointPath, and with SSE
// enabled the legacy HTTP+SSE endpoints are SSEPath and MessagePath.
package mcpclient

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
)

// Paths of the MCP endpoints.
const (
	// EndpointPath serves streamable HTTP.
	EndpointPath = "/mcp"
	// SSEPath opens an HTTP+SSE stream (protocol 2024-11-05 clients).
	SSEPath = "/sse"
	// MessagePath receives the messages of an HTTP+SSE session.
	MessagePath = "/message"
)

// TenantHeader names the tenant of a request on the unix socket. Over TCP
// the bearer token decides the tenant and the header, if sent, must agree.
const TenantHeader = "X-Cexec-Tenant"

// TenantEnv is the environment variable `cexecctl mcp` reads the tenant from
// when --tenant is not given.
const TenantEnv = "CEXEC_TENANT"

// TokenEnv is the environment variable `cexecctl mcp --url` reads the bearer
// token from.
const TokenEnv = "CEXEC_MCP_TOKEN"

// SocketPath is where a daemon whose control socket is controlSocket serves
// MCP: the same directory (private to the daemon's user), the same name with
// "-mcp" added, so daemons sharing a directory do not collide:
// /run/user/1000/cexec/cexecd.sock → /run/user/1000/cexec/cexecd-mcp.sock.
func SocketPath(controlSocket string) string {
	dir, base := filepath.Split(controlSocket)
	return filepath.Join(dir, strings.TrimSuffix(base, ".sock")+"-mcp.sock")
}

// UnixClient returns an http.Client whose connections all go to the unix
// socket at path, whatever the URL's host. Use it with base URL
// "http://cexecd".
func UnixClient(path string) *http.Client {
	return &http.Client{Transport: UnixTransport(path)}
}

// UnixTransport is the transport of UnixClient, for callers that need to
// set other fields of the http.Client.
func UnixTransport(path string) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 8,
	}
}

// UnixBaseURL is the base URL to use with UnixClient; the host part is
// never resolved.
const UnixBaseURL = "http://cexecd"
