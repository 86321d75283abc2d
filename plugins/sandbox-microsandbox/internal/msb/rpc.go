package msb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/cexec/cexec/pluginapi"
)

// rpcPath is the JSON-RPC endpoint of a 0.2 msb server.
const rpcPath = "/api/v1/rpc"

// healthPath is its unauthenticated health check.
const healthPath = "/api/v1/health"

// maxResponse bounds what the plugin reads of one server response.
const maxResponse = 64 << 20

// rpcClient speaks JSON-RPC 2.0 to a 0.2-era msb server.
type rpcClient struct {
	url string
	key string
	hc  *http.Client
	seq atomic.Int64
}

// ServerError is an error a 0.2 msb server answered with. The server
// reports failures in two shapes: JSON-RPC errors ({"jsonrpc":"2.0",
// "error":{"code":-32601,"message":...}}, for an unknown method or a bad
// jsonrpc field) and its own ({"error":"Invalid credentials","code":1001}
// with HTTP 401 for a missing or wrong API key, 400 with code 2001 for
// invalid input, 500 with code 5002 for everything that failed inside,
// including a sandbox that is not running and commands that failed in the
// guest).
type ServerError struct {
	Method     string
	HTTPStatus int
	// RPCCode is the JSON-RPC error code, or 0.
	RPCCode int
	// Code is the server's own error code (1001, 2001, 4001, 5002...), or 0.
	Code    int
	Message string
}

func (e *ServerError) Error() string {
	code := ""
	switch {
	case e.RPCCode != 0:
		code = fmt.Sprintf(", JSON-RPC error %d", e.RPCCode)
	case e.Code != 0:
		code = fmt.Sprintf(", error code %d", e.Code)
	}
	msg := e.Message
	switch {
	case e.HTTPStatus == http.StatusUnauthorized:
		msg += ": check api_key (the server's key from `msb server keygen`)"
	case e.RPCCode == -32601:
		msg += ": is this a 0.2 msb server?"
	}
	return fmt.Sprintf("msb server %s: HTTP %d%s: %s", e.Method, e.HTTPStatus, code, msg)
}

// Unwrap maps the server's error to cexec's sentinels.
func (e *ServerError) Unwrap() error {
	switch {
	case e.HTTPStatus == http.StatusUnauthorized || e.HTTPStatus == http.StatusForbidden:
		return pluginapi.ErrDenied
	case e.RPCCode == -32601:
		return pluginapi.ErrUnimplemented
	case e.HTTPStatus == http.StatusBadRequest && e.Code == 2001:
		return pluginapi.ErrInvalidArgument
	}
	return nil
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
	ID      int64  `json:"id"`
}

type rpcErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcErrorBody   `json:"error"`
}

// plainError is the server's non-JSON-RPC error body.
type plainError struct {
	Error *string `json:"error"`
	Code  int     `json:"code"`
}

// call invokes method with params and decodes the result into out (may be
// nil).
func (c *rpcClient) call(ctx context.Context, method string, params, out any) error {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method, Params: params, ID: c.seq.Add(1)})
	if err != nil {
		return fmt.Errorf("msb server %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+rpcPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("msb server %s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("msb server %s: %w", method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("msb server %s: read response: %w", method, err)
	}
	var rr rpcResponse
	rpcErr := json.Unmarshal(data, &rr)
	if resp.StatusCode != http.StatusOK {
		se := &ServerError{Method: method, HTTPStatus: resp.StatusCode}
		var pe plainError
		switch {
		case rpcErr == nil && rr.Error != nil:
			se.RPCCode, se.Message = rr.Error.Code, rr.Error.Message
		case json.Unmarshal(data, &pe) == nil && pe.Error != nil:
			se.Code, se.Message = pe.Code, *pe.Error
		default:
			se.Message = strings.TrimSpace(string(data))
			if len(se.Message) > 500 {
				se.Message = se.Message[:500] + "…"
			}
			if se.Message == "" {
				se.Message = http.StatusText(resp.StatusCode)
			}
		}
		return se
	}
	if rpcErr != nil {
		return fmt.Errorf("msb server %s: the response is not JSON-RPC: %w", method, rpcErr)
	}
	if rr.Error != nil {
		return &ServerError{Method: method, HTTPStatus: resp.StatusCode, RPCCode: rr.Error.Code, Message: rr.Error.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rr.Result, out); err != nil {
		return fmt.Errorf("msb server %s: unexpected result %.200s: %w", method, rr.Result, err)
	}
	return nil
}

// health checks the server's unauthenticated health endpoint.
func (c *rpcClient) health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+healthPath, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("msb server at %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("msb server at %s: health check answered HTTP %d", c.url, resp.StatusCode)
	}
	return nil
}

// startConfig is sandbox.start's config of a 0.2 server.
type startConfig struct {
	Image   string   `json:"image"`
	Memory  int64    `json:"memory"`
	CPUs    int64    `json:"cpus"`
	Volumes []string `json:"volumes,omitempty"`
	Envs    []string `json:"envs,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
}

type startParams struct {
	Sandbox string      `json:"sandbox"`
	Config  startConfig `json:"config"`
}

type sandboxParams struct {
	Sandbox string `json:"sandbox"`
}

// start runs sandbox.start and returns the server's message.
func (c *rpcClient) start(ctx context.Context, name string, cfg startConfig) (string, error) {
	var msg string
	err := c.call(ctx, "sandbox.start", startParams{Sandbox: name, Config: cfg}, &msg)
	return msg, err
}

// stop runs sandbox.stop.
func (c *rpcClient) stop(ctx context.Context, name string) error {
	return c.call(ctx, "sandbox.stop", sandboxParams{Sandbox: name}, nil)
}

// outputLine is one line of a command's or the REPL's output.
type outputLine struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

type commandParams struct {
	Sandbox string   `json:"sandbox"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Timeout int64    `json:"timeout,omitempty"`
}

// commandResult is sandbox.command.run's result.
type commandResult struct {
	Command  string       `json:"command"`
	Args     []string     `json:"args"`
	ExitCode int          `json:"exit_code"`
	Success  bool         `json:"success"`
	Output   []outputLine `json:"output"`
}

// stream returns the lines of one stream joined by newlines.
func (r *commandResult) stream(name string) string {
	var b strings.Builder
	for _, l := range r.Output {
		if l.Stream == name {
			b.WriteString(l.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// command runs a command in the guest with sandbox.command.run; timeout
// is in seconds, 0 for none.
func (c *rpcClient) command(ctx context.Context, name, command string, args []string, timeout int64) (*commandResult, error) {
	var r commandResult
	if args == nil {
		args = []string{}
	}
	if err := c.call(ctx, "sandbox.command.run", commandParams{Sandbox: name, Command: command, Args: args, Timeout: timeout}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

type replParams struct {
	Sandbox  string `json:"sandbox"`
	Language string `json:"language"`
	Code     string `json:"code"`
	Timeout  int64  `json:"timeout,omitempty"`
}

// replResult is sandbox.repl.run's result.
type replResult struct {
	Status   string       `json:"status"`
	Language string       `json:"language"`
	Output   []outputLine `json:"output"`
}

// repl runs Python code in the guest's REPL with sandbox.repl.run.
func (c *rpcClient) repl(ctx context.Context, name, code string, timeout int64) (*replResult, error) {
	var r replResult
	if err := c.call(ctx, "sandbox.repl.run", replParams{Sandbox: name, Language: "python", Code: code, Timeout: timeout}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// serverSandbox is one element of sandbox.metrics.get's result.
type serverSandbox struct {
	Name        string   `json:"name"`
	Running     bool     `json:"running"`
	CPUUsage    *float64 `json:"cpu_usage"`
	MemoryUsage *int64   `json:"memory_usage"`
	DiskUsage   *int64   `json:"disk_usage"`
}

// metrics runs sandbox.metrics.get for every sandbox of the server.
func (c *rpcClient) metrics(ctx context.Context) ([]serverSandbox, error) {
	var r struct {
		Sandboxes []serverSandbox `json:"sandboxes"`
	}
	if err := c.call(ctx, "sandbox.metrics.get", struct{}{}, &r); err != nil {
		return nil, err
	}
	return r.Sandboxes, nil
}

// authenticated reports whether err says the server refused the key.
func authenticated(err error) bool {
	var se *ServerError
	return !errors.As(err, &se) || se.HTTPStatus != http.StatusUnauthorized && se.HTTPStatus != http.StatusForbidden
}
