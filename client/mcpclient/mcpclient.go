// Package mcpclient is the client side of cexecd's MCP face: an http.Client
// for the daemon's private MCP unix socket and the execute_code latency
// benchmark that `cexecctl bench mcp` runs. Where the face listens and the
// names it answers to are in api/endpoint, which the daemon shares.
package mcpclient

import (
	"context"
	"net"
	"net/http"
)

// UnixClient returns an http.Client whose connections all go to the unix
// socket at path, whatever the URL's host. Use it with base URL
// endpoint.UnixBaseURL.
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
