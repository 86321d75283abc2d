package endpoint

import (
	"context"
	"net"
	"net/http"
)

// UnixClient returns an http.Client whose connections all go to the unix
// socket at path, whatever the URL's host: the way to reach the MCP face on
// MCPSocket, with base URL UnixBaseURL.
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
