// Package mcp is `cexecctl mcp`: the stdio MCP server an agent's client
// launches (Claude Desktop, Claude Code, any MCP client). It relays
// newline-delimited JSON-RPC between stdin/stdout and cexecd's streamable
// HTTP face, by default over the daemon's private MCP socket, so the agent
// reaches the daemon's tools without the daemon speaking stdio itself.
//
// The relay is transparent: messages pass unchanged in both directions. It
// adds the tenant header (--tenant or $CEXEC_TENANT), keeps the MCP session
// id, listens for server notifications on a GET stream, re-opens the session
// when the daemon dropped it (restart, idle timeout) and ends it when stdin
// closes.
package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/maxprocs"
)

// Command returns the mcp command.
func Command(env *cli.Env) *cobra.Command {
	var o Options
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP on stdin/stdout for an agent, relayed to cexecd",
		Long: `Serve MCP on stdin/stdout for an agent, relayed to cexecd.

An MCP client starts this command and talks JSON-RPC to it on stdin and
stdout; cexecctl passes every message to cexecd's MCP face and the answers
back. By default it uses the daemon's private MCP socket next to the control
socket (--address); --url points it at the daemon's TCP endpoint instead,
with the bearer token from $` + endpoint.TokenEnv + `.

Claude Desktop (claude_desktop_config.json):
  {"mcpServers": {"cexec": {"command": "cexecctl", "args": ["mcp", "--tenant", "` + endpoint.DefaultTenant + `"]}}}
Claude Code:
  claude mcp add cexec -- cexecctl mcp --tenant ` + endpoint.DefaultTenant,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			maxprocs.Set() // on an execution's path, as cexecd is
			if o.URL != "" && !cli.TenantChosen(cmd) {
				o.Tenant = "" // the token's tenant
			}
			if o.Token == "" {
				o.Token = os.Getenv(endpoint.TokenEnv)
			}
			o.Address = env.Address
			o.Stderr = env.Stderr
			return Run(cmd.Context(), o, cmd.InOrStdin(), env.Stdout)
		},
	}
	cli.TenantFlag(cmd.Flags(), &o.Tenant)
	cmd.Flags().StringVar(&o.URL, "url", "", "streamable HTTP endpoint, e.g. http://127.0.0.1:7797/mcp (default: the daemon's MCP socket)")
	cmd.Flags().StringVar(&o.Token, "token", "", "bearer token for --url (default $"+endpoint.TokenEnv+")")
	return cmd
}

// Options configure Run.
type Options struct {
	// Address is the daemon's control socket; its MCP socket is next to it
	// (endpoint.MCPSocket). "" means client.DefaultAddress().
	Address string
	// URL, when set, is used instead of the socket.
	URL    string
	Token  string
	Tenant string
	// HTTPClient overrides the client built from Address or URL.
	HTTPClient *http.Client
	// Stderr receives the relay's own messages; nil discards them.
	Stderr io.Writer
}

// Run relays between in and out until in ends (then it waits for the
// answers still due) or ctx is cancelled (then it drops them), and ends the
// MCP session. It fails at once when the daemon does not serve MCP.
func Run(ctx context.Context, o Options, in io.Reader, out io.Writer) error {
	r, err := newRelay(ctx, o, out)
	if err != nil {
		return err
	}
	return r.run(ctx, in)
}

// relay is one stdio session.
type relay struct {
	hc       *http.Client
	endpoint string
	headers  http.Header
	target   string // for messages: the socket or URL
	log      io.Writer

	outMu sync.Mutex
	out   io.Writer

	mu       sync.Mutex
	session  string
	protocol string
	initReq  []byte // the client's initialize, replayed to re-open a session
	initNote []byte // and its notifications/initialized
	gen      int    // counts sessions, so only one caller re-opens a dropped one
	listen   context.CancelFunc

	// calls tracks forwarded messages, listening the GET stream.
	calls     sync.WaitGroup
	listening sync.WaitGroup
}

func newRelay(ctx context.Context, o Options, out io.Writer) (*relay, error) {
	r := &relay{hc: o.HTTPClient, out: out, log: o.Stderr, headers: http.Header{}}
	if r.log == nil {
		r.log = io.Discard
	}
	if o.URL != "" {
		r.endpoint, r.target = o.URL, o.URL
		if r.hc == nil {
			r.hc = &http.Client{}
		}
		if o.Token != "" {
			r.headers.Set("Authorization", "Bearer "+o.Token)
		}
	} else {
		addr := o.Address
		if addr == "" {
			addr = client.DefaultAddress()
		}
		control := client.SocketPath(addr)
		sock := endpoint.MCPSocket(control)
		if err := checkSocket(ctx, control, sock); err != nil {
			return nil, err
		}
		r.endpoint, r.target = endpoint.UnixBaseURL+endpoint.MCPPath, sock
		if r.hc == nil {
			r.hc = endpoint.UnixClient(sock)
		}
	}
	if o.Tenant != "" {
		r.headers.Set(endpoint.TenantHeader, o.Tenant)
	}
	return r, nil
}

// checkSocket fails early, with a message that says what to do, when no
// daemon serves MCP at sock.
func checkSocket(ctx context.Context, control, sock string) error {
	if _, err := os.Stat(sock); err == nil {
		return nil
	}
	if _, err := os.Stat(control); err != nil {
		return &client.NotRunningError{Socket: control, Err: err}
	}
	return fmt.Errorf("cexecd at %s does not serve MCP: no socket %s; %s", control, sock, whyNoSocket(ctx, control))
}

// whyNoSocket asks the daemon's status why it does not serve the MCP
// socket; the daemon knows (a socket directory others can enter, say) and
// says what to do about it.
func whyNoSocket(ctx context.Context, control string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.New(ctx, control)
	if err != nil {
		return fmt.Sprintf("its control socket does not answer either (%v); start cexecd", err)
	}
	defer c.Close()
	st, err := c.Status(ctx)
	switch {
	case err != nil:
		return fmt.Sprintf("it did not say why (%v); see its log", err)
	case st.GetMcp() == nil:
		return "this cexecd predates the MCP face; upgrade it"
	case st.GetMcp().GetSocketOff() != "":
		return "cexecd says: " + st.GetMcp().GetSocketOff()
	}
	return "cexecd reports it as served, so the socket was removed; restart cexecd"
}

// message is what the relay needs to know of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (m message) isRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

func (r *relay) run(ctx context.Context, in io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			r.handle(ctx, line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(r.log, "cexecctl mcp: read stdin: %v\n", err)
			}
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	// A client that closes stdin after its last request (a script piping
	// messages) still gets the answers; a signal cancels them instead.
	r.calls.Wait()
	r.close()
	cancel()
	r.listening.Wait()
	return nil
}

// handle sends one message from the client. Requests run concurrently (an
// execute_code may take long); handle returns once the request is on the
// wire, so the daemon receives messages in the client's order.
func (r *relay) handle(ctx context.Context, line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		// Batches are not part of MCP since 2025-06-18; older clients'
		// batches pass through like any message.
		if !bytes.HasPrefix(line, []byte("[")) {
			r.emitError(json.RawMessage("null"), -32700, "parse error: "+err.Error())
			return
		}
	}
	if m.Method == "initialize" {
		r.initialize(ctx, line, m)
		return
	}
	if m.Method == "notifications/initialized" {
		r.mu.Lock()
		r.initNote = bytes.Clone(line)
		r.mu.Unlock()
	}
	sent := make(chan struct{})
	r.calls.Add(1)
	go func() {
		defer r.calls.Done()
		r.forward(ctx, line, m, sent)
	}()
	select {
	case <-sent:
	case <-ctx.Done():
	}
	if m.Method == "notifications/initialized" {
		r.startListening(ctx)
	}
}

// initialize opens the session synchronously: every later message needs
// its id.
func (r *relay) initialize(ctx context.Context, line []byte, m message) {
	r.mu.Lock()
	r.initReq = bytes.Clone(line)
	r.mu.Unlock()
	res, err := r.post(ctx, line, "", nil)
	if err != nil {
		r.emitError(m.ID, -32000, r.unreachable(err))
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		r.emitError(m.ID, -32000, httpError(res))
		return
	}
	var last []byte
	r.readMessages(res, func(msg []byte) {
		last = msg
		r.emit(msg)
	})
	r.mu.Lock()
	r.session = res.Header.Get("Mcp-Session-Id")
	r.protocol = protocolOf(last)
	r.gen++
	r.mu.Unlock()
}

func protocolOf(initResult []byte) string {
	var v struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	_ = json.Unmarshal(initResult, &v)
	return v.Result.ProtocolVersion
}

// forward posts one message and relays the answer, re-opening the session
// once if the daemon no longer knows it.
func (r *relay) forward(ctx context.Context, line []byte, m message, sent chan struct{}) {
	var once sync.Once
	wrote := func() { once.Do(func() { close(sent) }) }
	defer wrote()
	for attempt := 0; ; attempt++ {
		session, gen := r.current()
		res, err := r.post(ctx, line, session, wrote)
		if err != nil {
			if ctx.Err() == nil && m.isRequest() {
				r.emitError(m.ID, -32000, r.unreachable(err))
			} else if ctx.Err() == nil {
				fmt.Fprintf(r.log, "cexecctl mcp: %s\n", r.unreachable(err))
			}
			return
		}
		if res.StatusCode == http.StatusNotFound && session != "" && attempt == 0 {
			_ = res.Body.Close()
			if err := r.reopen(ctx, gen); err != nil {
				if m.isRequest() {
					r.emitError(m.ID, -32000, "the MCP session ended and could not be re-opened: "+err.Error())
				}
				return
			}
			continue
		}
		r.relayAnswer(res, m)
		return
	}
}

func (r *relay) relayAnswer(res *http.Response, m message) {
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusAccepted:
	case res.StatusCode == http.StatusOK:
		r.readMessages(res, r.emit)
	case m.isRequest():
		r.emitError(m.ID, -32000, httpError(res))
	default:
		fmt.Fprintf(r.log, "cexecctl mcp: %s: %s\n", m.Method, httpError(res))
	}
}

func (r *relay) current() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.session, r.gen
}

// reopen replays the client's initialize (its answer is not relayed: the
// client already has one) when the session of generation gen was dropped,
// unless another goroutine already did.
func (r *relay) reopen(ctx context.Context, gen int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen {
		return nil
	}
	if r.initReq == nil {
		return errors.New("no initialize to replay")
	}
	res, err := r.postLocked(ctx, r.initReq, "", nil)
	if err != nil {
		return errors.New(r.unreachable(err))
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Mcp-Session-Id") == "" {
		return errors.New(httpError(res))
	}
	r.session = res.Header.Get("Mcp-Session-Id")
	r.gen++
	fmt.Fprintf(r.log, "cexecctl mcp: the daemon dropped the MCP session; opened a new one\n")
	if r.initNote != nil {
		if res, err := r.postLocked(ctx, r.initNote, r.session, nil); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	return nil
}

// post sends one message in the current session; wrote, if not nil, is
// called once the request is on the wire.
func (r *relay) post(ctx context.Context, body []byte, session string, wrote func()) (*http.Response, error) {
	r.mu.Lock()
	protocol := r.protocol
	r.mu.Unlock()
	return r.send(ctx, body, session, protocol, wrote)
}

// postLocked is post for callers holding r.mu.
func (r *relay) postLocked(ctx context.Context, body []byte, session string, wrote func()) (*http.Response, error) {
	return r.send(ctx, body, session, r.protocol, wrote)
}

func (r *relay) send(ctx context.Context, body []byte, session, protocol string, wrote func()) (*http.Response, error) {
	if wrote != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote() }})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.setHeaders(req, session, protocol)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return r.hc.Do(req)
}

func (r *relay) setHeaders(req *http.Request, session, protocol string) {
	for k, v := range r.headers {
		req.Header[k] = v
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", protocol)
	}
}

// startListening opens the GET stream on which the daemon sends
// notifications that answer no request (resources/list_changed), and keeps
// it open while the relay runs.
func (r *relay) startListening(ctx context.Context) {
	r.mu.Lock()
	if r.listen != nil {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	r.listen = cancel
	r.mu.Unlock()
	r.listening.Add(1)
	go func() {
		defer r.listening.Done()
		backoff := time.Second
		for ctx.Err() == nil {
			session, _ := r.current()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.endpoint, nil)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.setHeaders(req, session, r.protocol)
			r.mu.Unlock()
			req.Header.Set("Accept", "text/event-stream")
			res, err := r.hc.Do(req)
			if err == nil {
				if res.StatusCode == http.StatusMethodNotAllowed {
					// The daemon offers no stream; nothing to listen to.
					res.Body.Close()
					return
				}
				if res.StatusCode == http.StatusOK {
					backoff = time.Second
					r.readMessages(res, r.emit)
				}
				res.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}()
}

// readMessages calls fn with each JSON-RPC message of a response: the body
// of a JSON response, or each event's data of an SSE stream.
func (r *relay) readMessages(res *http.Response, fn func([]byte)) {
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(res.Body)
		if err != nil {
			fmt.Fprintf(r.log, "cexecctl mcp: read response: %v\n", err)
		}
		if b = bytes.TrimSpace(b); len(b) > 0 {
			fn(b)
		}
		return
	}
	br := bufio.NewReaderSize(res.Body, 64<<10)
	var data bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0 && err == nil:
			if data.Len() > 0 {
				fn(bytes.Clone(data.Bytes()))
				data.Reset()
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		}
		if err != nil {
			if data.Len() > 0 {
				fn(bytes.Clone(data.Bytes()))
			}
			return
		}
	}
}

// emit writes one message to stdout as a single line.
func (r *relay) emit(msg []byte) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, msg); err != nil {
		fmt.Fprintf(r.log, "cexecctl mcp: dropped a malformed message from the daemon: %v\n", err)
		return
	}
	buf.WriteByte('\n')
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if _, err := r.out.Write(buf.Bytes()); err != nil {
		fmt.Fprintf(r.log, "cexecctl mcp: write stdout: %v\n", err)
	}
}

// emitError answers a request the daemon could not.
func (r *relay) emitError(id json.RawMessage, code int, msg string) {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg},
	})
	r.emit(b)
}

func (r *relay) unreachable(err error) string {
	return fmt.Sprintf("cexecd is not reachable at %s: %v (is cexecd running?)", r.target, err)
}

func httpError(res *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		return "cexecd answered " + res.Status
	}
	return "cexecd answered " + res.Status + ": " + msg
}

// close ends the session so the daemon can release it at once.
func (r *relay) close() {
	r.mu.Lock()
	session, protocol := r.session, r.protocol
	if r.listen != nil {
		r.listen()
	}
	r.mu.Unlock()
	if session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.endpoint, nil)
	if err != nil {
		return
	}
	r.setHeaders(req, session, protocol)
	if res, err := r.hc.Do(req); err == nil {
		res.Body.Close()
	}
}
