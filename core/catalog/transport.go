package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/telemetry"
	"github.com/cexec/cexec/internal/childenv"
	"github.com/cexec/cexec/internal/hclogslog"
)

// rawSink collects the raw JSON results of the tools/list pages answered
// while it rides in a request's context.
type rawSink struct {
	mu    sync.Mutex
	pages []json.RawMessage
}

type rawSinkKey struct{}

// withRawSink returns ctx carrying a new sink for tools/list results.
func withRawSink(ctx context.Context) (context.Context, *rawSink) {
	s := &rawSink{}
	return context.WithValue(ctx, rawSinkKey{}, s), s
}

// tap records the raw result of a tools/list response into the request's
// sink. mcp-go decodes tools into mcp.Tool, whose InputSchema and
// OutputSchema are typed structs: the decode keeps only type, properties,
// required, additionalProperties and $defs of each schema and drops
// everything else ($schema, top-level description, anyOf, definitions, ...),
// and RawInputSchema/RawOutputSchema are `json:"-"`, filled only by servers
// building tools, never by decoding. So the catalog takes the schemas from
// the bytes on the wire, seen here, and uses mcp-go's decoded list only to
// know which tools the client accepted.
func tap(ctx context.Context, req transport.JSONRPCRequest, resp *transport.JSONRPCResponse) {
	if req.Method != "tools/list" || resp == nil || resp.Error != nil {
		return
	}
	if s, ok := ctx.Value(rawSinkKey{}).(*rawSink); ok {
		s.mu.Lock()
		s.pages = append(s.pages, append(json.RawMessage(nil), resp.Result...))
		s.mu.Unlock()
	}
}

// checkDiscover turns a server/discover answer that lists no protocol
// version into "method not found", so that the client falls back to the
// initialize handshake. mcp-go takes any successful answer for a 2026-07-28
// server, and some 2025-11-25 servers answer every method they do not know
// with an empty result; such a server would then never be initialized.
func checkDiscover(req transport.JSONRPCRequest, resp *transport.JSONRPCResponse) {
	if req.Method != string(mcp.MethodServerDiscover) || resp == nil || resp.Error != nil {
		return
	}
	var r struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(resp.Result, &r) == nil && len(r.SupportedVersions) > 0 {
		return
	}
	resp.Result = nil
	resp.Error = &mcp.JSONRPCErrorDetails{Code: mcp.METHOD_NOT_FOUND, Message: "server/discover answered without supportedVersions"}
}

// The tapped transports embed the concrete mcp-go transports, so the client
// sees exactly the optional interfaces each one implements (bidirectional
// requests, HTTP protocol headers, legacy-only listening, connection-lost
// callbacks) and only SendRequest is intercepted (and, for stdio, Start and
// Close, which run the process: see tappedStdio).

type tappedHTTP struct{ *transport.StreamableHTTP }

func (t tappedHTTP) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.StreamableHTTP.SendRequest(ctx, req)
	if err == nil {
		checkDiscover(req, resp)
		tap(ctx, req, resp)
	}
	return resp, err
}

type tappedSSE struct{ *transport.SSE }

func (t tappedSSE) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.SSE.SendRequest(ctx, req)
	if err == nil {
		checkDiscover(req, resp)
		tap(ctx, req, resp)
	}
	return resp, err
}

type tappedInProcess struct{ *transport.InProcessTransport }

// SendRequest hands the in-process server a context without the caller's
// values: a call made while serving the MCP face carries the face's HTTP
// request headers in mcp-go's context key, which the in-process server
// would read as its own and check against this request (SEP-2243).
func (t tappedInProcess) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.InProcessTransport.SendRequest(valueless{ctx}, req)
	if err == nil {
		tap(ctx, req, resp)
	}
	return resp, err
}

// valueless is a context that ends with its parent but carries none of its
// values.
type valueless struct{ context.Context }

func (valueless) Value(any) any { return nil }

// newTransport builds the mcp-go transport for one connection attempt to s.
// listen asks a streamable HTTP transport for the standalone GET stream that
// servers on protocol versions before 2026-07-28 send notifications (and
// some their elicitation requests) on.
func (u *upstream) newTransport(s *config.MCPServer, listen bool) (transport.Interface, *stdioProcess, error) {
	log := hclogslog.New(u.log)
	if r := urlRedactor(s); r != nil {
		log = hclogslog.NewRedacting(u.log, r)
	}
	switch s.Transport {
	case config.TransportStdio:
		env := childenv.Build(u.cat.opts.LookupEnv, s.Env)
		path, err := childenv.LookPath(s.Command, env, s.Cwd)
		if err != nil {
			return nil, nil, err
		}
		proc := &stdioProcess{stderr: &lineLogger{log: u.log, mask: &u.cat.mask}}
		proc.build = func(ctx context.Context) *exec.Cmd {
			cmd := exec.CommandContext(ctx, path, s.Args...)
			cmd.Env = env // never os.Environ(): mcp-go's default would hand the daemon's secrets to the child
			cmd.Dir = s.Cwd
			// A grandchild holding stderr open must not stall Wait forever.
			cmd.WaitDelay = 2 * time.Second
			setProcAttrs(cmd)
			return cmd
		}
		t, err := newTappedStdio(proc, log, u.stray)
		if err != nil {
			return nil, nil, err
		}
		return t, proc, nil
	case config.TransportHTTP:
		hc := telemetry.HTTPClient()
		if ac := u.authClient(s); ac != nil {
			hc = ac
		}
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(log), transport.WithHTTPBasicClient(staleSessionAs404(hc))}
		if len(s.Headers) > 0 {
			opts = append(opts, transport.WithHTTPHeaders(s.Headers))
		}
		if listen {
			// Deprecated for 2026-07-28, which has subscriptions/listen
			// instead; listen is only set for servers on earlier versions,
			// where the GET stream is how notifications arrive.
			//lint:ignore SA1019 used only with servers that predate 2026-07-28
			opts = append(opts, transport.WithContinuousListening())
		}
		t, err := transport.NewStreamableHTTP(s.URL, opts...)
		if err != nil {
			return nil, nil, err
		}
		return tappedHTTP{t}, nil, nil
	case config.TransportSSE:
		opts := []transport.ClientOption{transport.WithSSELogger(log), transport.WithResponseTimeout(callTimeout(s))}
		if hc := telemetry.HTTPClient(); hc != nil {
			opts = append(opts, transport.WithHTTPClient(hc))
		}
		if len(s.Headers) > 0 {
			opts = append(opts, transport.WithHeaders(s.Headers))
		}
		if hc := u.authClient(s); hc != nil {
			opts = append(opts, transport.WithHTTPClient(hc))
		}
		t, err := transport.NewSSE(s.URL, opts...)
		if err != nil {
			return nil, nil, err
		}
		return tappedSSE{t}, nil, nil
	case config.TransportBuiltin:
		build := u.cat.opts.Builtins[s.Name]
		if build == nil {
			return nil, nil, fmt.Errorf("cexecd has no built-in server %q", s.Name)
		}
		srv, err := build(u.tenant)
		if err != nil {
			return nil, nil, err
		}
		return tappedInProcess{transport.NewInProcessTransport(srv)}, nil, nil
	default:
		return nil, nil, fmt.Errorf("unknown transport %q", s.Transport)
	}
}

// authClient is the HTTP client signing u's requests with its tenant's
// OAuth token, or nil for a server without OAuth.
func (u *upstream) authClient(s *config.MCPServer) *http.Client {
	if s.OAuth == nil || u.cat.opts.Authorizer == nil {
		return nil
	}
	return u.cat.opts.Authorizer.Client(s, u.tenant)
}

// callTimeout is the bound on one call to s.
func callTimeout(s *config.MCPServer) time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultCallTimeout
}

// staleSessionAs404 returns a copy of hc (nil: a default client) that turns
// a 400 answer to a request in a session, when the answer speaks of the
// session, into the 404 the specification asks for. The TypeScript and
// Python SDKs' servers answer a session id they do not know (after a
// restart) with 400 "No valid session ID provided"; mcp-go starts over
// only on 404, so without this every call would fail until cexecd restarts.
func staleSessionAs404(hc *http.Client) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = staleSession{base: base}
	return c
}

type staleSession struct{ base http.RoundTripper }

func (t staleSession) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest || req.Header.Get(mcpSessionHeader) == "" {
		return resp, err
	}
	head, rerr := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if rerr == nil && bytes.Contains(bytes.ToLower(head), []byte("session")) {
		resp.Body.Close()
		resp.StatusCode, resp.Status = http.StatusNotFound, "404 Not Found"
		resp.Body = io.NopCloser(bytes.NewReader(head))
		return resp, nil
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return resp, nil
}

// mcpSessionHeader carries the streamable HTTP session id.
const mcpSessionHeader = "Mcp-Session-Id"

// urlRedactor masks s's url where it has a secret in it (an env() value),
// or is nil. Go's HTTP errors quote the url of the request that failed.
func urlRedactor(s *config.MCPServer) *strings.Replacer {
	if !s.URLSensitive || s.URL == "" {
		return nil
	}
	pairs := []string{s.URL, maskedURL}
	if parsed, err := neturl.Parse(s.URL); err == nil {
		if r := parsed.Redacted(); r != s.URL {
			pairs = append(pairs, r, maskedURL)
		}
		if parsed.RawQuery != "" {
			// The SSE transport posts to an endpoint the server names,
			// which may repeat the query.
			pairs = append(pairs, parsed.RawQuery, "(sensitive)")
		}
	}
	return strings.NewReplacer(pairs...)
}

// maskedURL stands for a url that has a secret in it.
const maskedURL = "(sensitive)"

// redacted is an error whose text has a secret masked; it still wraps the
// original, for errors.Is and errors.As.
type redacted struct {
	err error
	r   *strings.Replacer
}

func (e *redacted) Error() string { return e.r.Replace(e.err.Error()) }
func (e *redacted) Unwrap() error { return e.err }

// redact masks the server's sensitive url in err's text.
func (u *upstream) redact(err error) error {
	if err == nil {
		return nil
	}
	if r := urlRedactor(u.cfg); r != nil {
		return &redacted{err: err, r: r}
	}
	return err
}
