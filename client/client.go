// Package client is the Go SDK for cexecd's control API (api/cexec/v1). It is
// what cexecctl is built on: everything the CLI does, a Go program can do
// through a *Client.
//
// Responses are the generated cexecv1 messages, so fields added to the API
// reach SDK users without a release of this package. Errors from a daemon
// that is not running are *NotRunningError, whose message says where the
// client looked and how to start cexecd.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"math"
	"net"
	"os"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/localgrpc"
)

// DefaultAddress is the address New uses for "": $CEXECD_ADDRESS, else
// $CEXEC_SOCKET (where cexecd was told to listen), else the socket cexecd
// listens on by default.
func DefaultAddress() string {
	return endpoint.Address()
}

// SocketPath turns an address ("/path/cexecd.sock", "unix:/path" or
// "unix:///path") into the path of the unix socket.
func SocketPath(address string) string {
	switch {
	case strings.HasPrefix(address, "unix://"):
		return strings.TrimPrefix(address, "unix://")
	case strings.HasPrefix(address, "unix:"):
		return strings.TrimPrefix(address, "unix:")
	}
	return address
}

// NotRunningError reports that no daemon answers at Socket.
type NotRunningError struct {
	Socket string
	Err    error
	// NotSocket, when set, says what Socket is instead ("a regular
	// file"): a mistyped address, where cexecd must not be started.
	NotSocket string
}

// Error names the socket, the reason and the command that starts cexecd
// there, unless the path is something else than a socket.
func (e *NotRunningError) Error() string {
	if e.NotSocket != "" {
		return fmt.Sprintf("%s is not a cexecd socket: it is %s; check --address or $CEXECD_ADDRESS", e.Socket, e.NotSocket)
	}
	hint := "cexecd -config cexec.hcl"
	if e.Socket != endpoint.DefaultSocket() {
		hint += " -socket " + e.Socket
	}
	return fmt.Sprintf("cexecd is not running at %s (%s); start it with: %s", e.Socket, reason(e.Err), hint)
}

// Unwrap returns the dial error.
func (e *NotRunningError) Unwrap() error { return e.Err }

// reason shortens a dial error to its system-call part, e.g. "connect: no
// such file or directory": the socket path is already in the message.
func reason(err error) string {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}

// Client talks to one cexecd. It is safe for concurrent use.
type Client struct {
	socket string
	conn   *grpc.ClientConn
	rpc    cexecv1.ControlClient
}

// New connects to the daemon at address ("" means DefaultAddress()). It
// returns a *NotRunningError when nothing listens there.
func New(ctx context.Context, address string) (*Client, error) {
	if address == "" {
		address = DefaultAddress()
	}
	socket := SocketPath(address)
	if socket == "" {
		return nil, fmt.Errorf("empty cexecd address")
	}
	// Probe once so a missing daemon is reported now, in words, instead of
	// as a gRPC Unavailable on the first call.
	if err := probe(ctx, socket); err != nil {
		return nil, err
	}
	opts := append(localgrpc.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The daemon's answers are as large as what they show: a workflow
		// run's output alone may be 16 MiB, past gRPC's default 4 MiB.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}),
	)
	conn, err := grpc.NewClient("passthrough:///cexecd", opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to cexecd at %s: %w", socket, err)
	}
	return &Client{socket: socket, conn: conn, rpc: cexecv1.NewControlClient(conn)}, nil
}

// Dial connects to the daemon at DefaultAddress().
func Dial(ctx context.Context) (*Client, error) {
	return New(ctx, "")
}

func probe(ctx context.Context, socket string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err == nil {
		return c.Close()
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		e := &NotRunningError{Socket: socket, Err: err}
		if fi, serr := os.Lstat(socket); serr == nil && fi.Mode().Type() != fs.ModeSocket {
			e.NotSocket = "a directory"
			if !fi.IsDir() {
				e.NotSocket = "not a socket"
				if fi.Mode().IsRegular() {
					e.NotSocket = "a regular file"
				}
			}
		}
		return e
	}
	return fmt.Errorf("connect to cexecd at %s: %w", socket, err)
}

// Socket is the path of the unix socket the client talks to.
func (c *Client) Socket() string { return c.socket }

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Control exposes the raw generated gRPC client, for calls this package does
// not wrap yet.
func (c *Client) Control() cexecv1.ControlClient { return c.rpc }

// wrap turns a transport failure into *NotRunningError when the daemon went
// away between New and the call, and adds the call's name otherwise.
func (c *Client) wrap(ctx context.Context, call string, err error) error {
	if status.Code(err) == codes.Unavailable {
		if perr := probe(ctx, c.socket); perr != nil {
			return perr
		}
	}
	return fmt.Errorf("%s: %w", call, err)
}

// ErrStoppedMidway is wrapped by a streaming call's error when the daemon
// went away after the call had started (it was stopped or crashed): the
// call's work was cut short, and cexecd may well be started again.
var ErrStoppedMidway = errors.New("cexecd stopped during the call (shut down or crashed), which ended it")

// wrapMidway is wrap for a stream that had already delivered events: a
// lost daemon then ended the call under way, which "not running, start
// it" would misdescribe.
func (c *Client) wrapMidway(ctx context.Context, call string, err error) error {
	if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", call, ErrStoppedMidway)
	}
	return c.wrap(ctx, call, err)
}

// Status reports the daemon's version, uptime, config file and plugins.
func (c *Client) Status(ctx context.Context) (*cexecv1.StatusResponse, error) {
	r, err := c.rpc.Status(ctx, &cexecv1.StatusRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "status", err)
	}
	return r, nil
}

// ListPlugins returns the state of every configured plugin.
func (c *Client) ListPlugins(ctx context.Context) ([]*cexecv1.PluginStatus, error) {
	r, err := c.rpc.ListPlugins(ctx, &cexecv1.ListPluginsRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "list plugins", err)
	}
	return r.GetPlugins(), nil
}

// PingPlugin calls Info on the plugin of the given kind and name through the
// daemon. A gRPC NotFound status means no such plugin is configured.
func (c *Client) PingPlugin(ctx context.Context, kind, name string) (*cexecv1.PingPluginResponse, error) {
	r, err := c.rpc.PingPlugin(ctx, &cexecv1.PingPluginRequest{Kind: kind, Name: name})
	if err != nil {
		return nil, c.wrap(ctx, "ping plugin "+kind+"/"+name, err)
	}
	return r, nil
}

// CheckConfig validates the config file at path as the daemon sees it (""
// checks the daemon's own file). A relative path is resolved against the
// daemon's working directory, so callers should pass absolute paths.
// Problems come back as diagnostics, not as an error.
func (c *Client) CheckConfig(ctx context.Context, path string) (*cexecv1.CheckConfigResponse, error) {
	r, err := c.rpc.CheckConfig(ctx, &cexecv1.CheckConfigRequest{Path: path})
	if err != nil {
		return nil, c.wrap(ctx, "check config", err)
	}
	return r, nil
}

// ShowConfig returns the daemon's effective config as JSON, secrets masked.
func (c *Client) ShowConfig(ctx context.Context) (*cexecv1.ShowConfigResponse, error) {
	r, err := c.rpc.ShowConfig(ctx, &cexecv1.ShowConfigRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "show config", err)
	}
	return r, nil
}

// Exec runs code in a pooled sandbox and yields its output events, the
// final one carrying the result. Breaking out of the loop cancels the run.
func (c *Client) Exec(ctx context.Context, req *cexecv1.ExecRequest) iter.Seq2[*cexecv1.ExecEvent, error] {
	return func(yield func(*cexecv1.ExecEvent, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.rpc.Exec(ctx, req)
		if err != nil {
			yield(nil, c.wrap(ctx, "exec", err))
			return
		}
		got := false
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil && got {
				yield(nil, c.wrapMidway(ctx, "exec", err))
				return
			}
			if err != nil {
				yield(nil, c.wrap(ctx, "exec", err))
				return
			}
			got = true
			if !yield(ev, nil) {
				return
			}
		}
	}
}
