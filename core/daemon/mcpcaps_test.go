package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
)

// TestMCPConnectionCaps fills the TCP face's connection caps, per peer and
// overall, as a flood of idle connections would: connections over a cap are
// closed at once, and the control API and MCP calls (over TCP while a slot
// is free, over the private socket always) still answer. The daemon logs
// its open file limit.
func TestMCPConnectionCaps(t *testing.T) {
	const maxConns, perPeer = 8, 4
	t.Setenv("CEXEC_TEST_MCP_TOKEN", "tok-caps")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "cexecd.sock")
	cfg := writeConfig(t, dir, fmt.Sprintf(`cexec {
  data_dir = "data"
  socket   = "run/cexecd.sock"
}
mcp {
  listen                   = %q
  tokens                   = [{ token = env("CEXEC_TEST_MCP_TOKEN"), tenant = "default" }]
  read_header_timeout      = "5m"
  max_connections          = %d
  max_connections_per_peer = %d
}
`, addr, maxConns, perPeer))
	d := start(t, Options{ConfigFile: cfg})
	ctl := d.ready(t, sock)
	if !strings.Contains(d.stderr.String(), "open file limit") {
		t.Errorf("the daemon did not log its open file limit:\n%s", d.stderr)
	}

	// One peer holds its share of idle connections; its next one is closed.
	for range perPeer {
		idleConn(t, "127.0.0.2", addr)
	}
	if !closedAtOnce(t, idleConn(t, "127.0.0.2", addr), 2*time.Second) {
		t.Error("a connection over the per-peer cap was kept open")
	}
	tcp, err := client.NewStreamableHttpClient("http://"+addr+endpoint.MCPPath,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok-caps"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tcp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	initialize(ctx, t, tcp)
	if _, isErr := callTool(t, tcp, "list_tools", nil); isErr {
		t.Error("list_tools over TCP failed while another peer was at its cap")
	}
	_ = tcp.Close()

	// Other peers take the remaining slots until one is refused; a held
	// connection only costs the wait, so it is short here.
	refused := false
	for i := 0; i <= maxConns && !refused; i++ {
		refused = closedAtOnce(t, idleConn(t, fmt.Sprintf("127.0.0.%d", 3+i/perPeer), addr), 500*time.Millisecond)
	}
	if !refused {
		t.Fatalf("%d more connections were all kept open; max_connections is %d", maxConns+1, maxConns)
	}
	if _, err := ctl.Status(ctx, &cexecv1.StatusRequest{}); err != nil {
		t.Errorf("Status with the TCP face full: %v", err)
	}
	unix := mcpSession(t, endpoint.MCPSocket(sock), "default")
	defer func() { _ = unix.Close() }()
	if _, isErr := callTool(t, unix, "list_tools", nil); isErr {
		t.Error("list_tools over the private socket failed with the TCP face full")
	}
}

// idleConn connects from the loopback address from to addr and sends
// nothing; it is closed when the test ends.
func idleConn(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedAtOnce reports whether the daemon closed c: a read ends in EOF or a
// reset, not in the test's own deadline after wait.
func closedAtOnce(t *testing.T, c net.Conn, wait time.Duration) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}
