package mcpclient

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/cexec/cexec/api/endpoint"
)

// connect starts one session's client: over streamable HTTP on o.URL, or
// on a server of its own started from o.Command. The tail holds the end of
// that server's stderr, for errors (empty for HTTP).
func connect(ctx context.Context, o BenchOptions) (*client.Client, *stderrTail, error) {
	tail := &stderrTail{}
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
			return nil, nil, fmt.Errorf("start %s: %w%s", target(o), err, tail.said())
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

// stderrTail keeps the last tailSize bytes a stdio server wrote to stderr.
type stderrTail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// said is "; its stderr ends: ..." when the server wrote anything.
func (t *stderrTail) said() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return "; its stderr ends: " + s
}
