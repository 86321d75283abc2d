package mcpclient

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/tailbuf"
)

// connect starts one session's client: over streamable HTTP on o.URL, or
// on a server of its own started from o.Command. The tail holds the end of
// that server's stderr, for errors (empty for HTTP).
func connect(ctx context.Context, o BenchOptions) (*client.Client, *tailbuf.Buffer, error) {
	tail := tailbuf.New(tailSize)
	if len(o.Command) > 0 {
		var cmd *exec.Cmd
		t := transport.NewStdioWithOptions(o.Command[0], nil, o.Command[1:],
			transport.WithCommandFunc(func(ctx context.Context, name string, env, args []string) (*exec.Cmd, error) {
				cmd = exec.CommandContext(ctx, name, args...)
				cmd.Env = append(os.Environ(), env...)
				return cmd, nil
			}),
			transport.WithCommandStderrWriter(tail))
		c := client.NewClient(t)
		if err := c.Start(ctx); err != nil {
			return nil, nil, fmt.Errorf("start %s: %w%s", target(o), err, said(tail))
		}
		if o.OnServer != nil {
			o.OnServer(cmd.Process.Pid)
		}
		return c, tail, nil
	}
	headers := map[string]string{}
	if o.Token != "" {
		headers["Authorization"] = "Bearer " + o.Token
	}
	if o.Tenant != "" {
		headers[endpoint.TenantHeader] = o.Tenant
	}
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(headers)}
	if o.HTTPClient != nil {
		opts = append(opts, transport.WithHTTPBasicClient(o.HTTPClient))
	}
	c, err := client.NewStreamableHttpClient(o.URL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp client for %s: %w", o.URL, err)
	}
	if err := c.Start(ctx); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("connect to %s: %w", o.URL, err)
	}
	return c, tail, nil
}

// target names what the sessions talk to, for errors.
func target(o BenchOptions) string {
	if len(o.Command) > 0 {
		return strings.Join(o.Command, " ")
	}
	return o.URL
}

// tailSize is how much of a server's stderr an error quotes.
const tailSize = 2048

// said is "; its stderr ends: ..." when the server wrote anything.
func said(tail *tailbuf.Buffer) string {
	s := strings.TrimSpace(tail.String())
	if s == "" {
		return ""
	}
	return "; its stderr ends: " + s
}
