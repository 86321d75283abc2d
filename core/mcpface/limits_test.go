package mcpface

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
)

// shortTimeouts makes every timeout of the face's server short.
func shortTimeouts(o *Options, _ *world) {
	o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
}

// serveUnix serves w's face on a private unix socket too and returns its
// path.
func serveUnix(t *testing.T, w *world) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cexec-mcp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcp.sock")
	ln, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, w.face, ln)
	return path
}

// closedByServer reports whether the server closes c: a read ends in EOF
// (or a reset) rather than in the test's own generous deadline.
func closedByServer(t *testing.T, r io.Reader, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

const getReq = "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

// TestConnTimeouts: on both listeners, a connection that sends nothing is
// closed after the header timeout, an idle keep-alive one after the idle
// timeout.
func TestConnTimeouts(t *testing.T) {
	w := newWorld(t, shortTimeouts)
	sock := serveUnix(t, w)
	dial := map[string]func() (net.Conn, error){
		"tcp":  func() (net.Conn, error) { return net.Dial("tcp", strings.TrimPrefix(w.url, "http://")) },
		"unix": func() (net.Conn, error) { return net.Dial("unix", sock) },
	}
	for _, network := range []string{"tcp", "unix"} {
		for _, tt := range []struct {
			name string
			send string
		}{
			{"silent", ""},
			{"idle after a request", getReq},
		} {
			t.Run(network+"/"+tt.name, func(t *testing.T) {
				c, err := dial[network]()
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				br := bufio.NewReader(c)
				if tt.send != "" {
					if _, err := io.WriteString(c, tt.send); err != nil {
						t.Fatal(err)
					}
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, res.Body)
					if res.Close {
						t.Fatalf("the server closed a keep-alive connection after %s", res.Status)
					}
				}
				if !closedByServer(t, br, c) {
					t.Error("the server kept the connection open")
				}
			})
		}
	}
}

// TestStreamsOutliveTimeouts: the read timeout ends neither a call that runs
// longer than it nor an open GET stream. (The idle timeout stays long: a
// short one races the client's reuse of keep-alive connections.)
func TestStreamsOutliveTimeouts(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.ReadHeaderTimeout, o.ReadTimeout = 100*time.Millisecond, 100*time.Millisecond
	})
	c := connect(t, w.url+endpoint.MCPPath)
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": "import time\ntime.sleep(0.5)\nprint('slept')"})
	if res.IsError || !strings.HasPrefix(text, "slept") {
		t.Errorf("a call longer than the read timeout: %s", text)
	}

	raw := newRaw(t, nil, w.url+endpoint.MCPPath)
	if st := raw.initialize(); st != http.StatusOK {
		t.Fatalf("initialize: %d", st)
	}
	req, _ := http.NewRequest(http.MethodGet, raw.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", raw.session)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %s", stream.Status)
	}
	// Outlast the read timeout, then expect the stream to carry a notification.
	time.Sleep(500 * time.Millisecond)
	w.face.NotifyResourcesChanged()
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "notifications/resources/list_changed") {
			return
		}
	}
	t.Errorf("the GET stream ended before the notification: %v", sc.Err())
}

// TestConnectionCaps: over the overall or the per-peer cap a connection is
// closed at once; a closed connection frees its slot.
func TestConnectionCaps(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) { o.MaxConnections, o.MaxConnectionsPerPeer = 4, 2 })
	addr := strings.TrimPrefix(w.url, "http://")
	from := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// served sends a request and reports whether it got an answer.
	served := func(c net.Conn) bool {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, getReq); err != nil {
			return false
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		res.Body.Close()
		return true
	}
	tests := []struct {
		peer string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.1", true},
		{"127.0.0.1", false}, // per-peer cap
		{"127.0.0.2", true},
		{"127.0.0.2", true},
		{"127.0.0.3", false}, // overall cap
	}
	var held []net.Conn
	for i, tt := range tests {
		c := from(tt.peer)
		if got := served(c); got != tt.want {
			t.Fatalf("connection %d from %s: served %v, want %v", i, tt.peer, got, tt.want)
		}
		if tt.want {
			held = append(held, c)
		}
	}
	_ = held[0].Close()
	// The server notices the close when its read fails; retry a bounded
	// number of times.
	for i := 0; ; i++ {
		if served(from("127.0.0.3")) {
			break
		}
		if i == 50 {
			t.Fatal("a closed connection did not free its slot")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRefusedClosesConnection: a request answered 401 (or another refusal)
// closes its connection, so unauthenticated clients cannot park them.
func TestRefusedClosesConnection(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) { o.Tokens = []Token{{Token: "tok", Tenant: "acme"}} })
	for _, tt := range []struct {
		name, auth string
	}{
		{"no token", ""},
		{"wrong token", "Authorization: Bearer nope\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(w.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + tt.auth +
				"Content-Length: " + strconv.Itoa(len(initBody)) + "\r\n\r\n" + initBody
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			if res.StatusCode != http.StatusUnauthorized || !res.Close {
				t.Errorf("status %s, close %v; want 401 and Connection: close", res.Status, res.Close)
			}
			if !closedByServer(t, br, c) {
				t.Error("the server kept the refused connection open")
			}
		})
	}
}

// TestRequestBodyLimit: a body over the limit gets 413, without being read
// when its length is declared, cut off at the limit when it is chunked.
func TestRequestBodyLimit(t *testing.T) {
	const limit = 1 << 10
	w := newWorld(t, func(o *Options, _ *world) { o.MaxRequestBody = limit })
	padded := func(n int) string { return initBody[:len(initBody)-1] + strings.Repeat(" ", n-len(initBody)) + "}" }
	post := func(body string, chunked bool) int {
		req, _ := http.NewRequest(http.MethodPost, w.url+endpoint.MCPPath, strings.NewReader(body))
		if chunked {
			// An io.Reader of unknown length is sent chunked.
			req, _ = http.NewRequest(http.MethodPost, w.url+endpoint.MCPPath, io.MultiReader(strings.NewReader(body)))
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	tests := []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"at the limit", limit, false, http.StatusOK},
		{"over the limit", limit + 1, false, http.StatusRequestEntityTooLarge},
		{"chunked at the limit", limit, true, http.StatusOK},
		{"chunked over the limit", 4 * limit, true, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := post(padded(tt.size), tt.chunked); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
		})
	}
}

// TestSessionsPerTenant: over the cap initialize is refused with 429 for
// that tenant only; an ended session frees its slot.
func TestSessionsPerTenant(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) {
		o.MaxSessionsPerTenant = 2
		o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}, {Token: "tok-beta", Tenant: "beta"}}
	})
	client := func(token string) *rawClient {
		c := newRaw(t, nil, w.url+endpoint.MCPPath)
		c.header.Set("Authorization", "Bearer "+token)
		return c
	}
	first := client("tok-acme")
	for i, c := range []*rawClient{first, client("tok-acme")} {
		if st := c.initialize(); st != http.StatusOK {
			t.Fatalf("acme's session %d: %d", i+1, st)
		}
	}
	res, body := client("tok-acme").do(http.MethodPost, initBody)
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "max_sessions_per_tenant") {
		t.Errorf("acme's third session: %s %s", res.Status, body)
	}
	if st := client("tok-beta").initialize(); st != http.StatusOK {
		t.Errorf("beta's first session: %d", st)
	}
	if res, _ := first.do(http.MethodDelete, ""); res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", res.Status)
	}
	if st := client("tok-acme").initialize(); st != http.StatusOK {
		t.Errorf("acme's session after one ended: %d", st)
	}
}
