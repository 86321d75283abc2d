package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// MethodReadResource is the runtime's host call method for read_resource.
const MethodReadResource = "read_resource"

// ResourceReader reads an upstream's resources; *catalog.Catalog implements
// it. A Catalog without it cannot serve read_resource.
type ResourceReader interface {
	ReadResource(ctx context.Context, tenant, server, uri string) (*mcp.ReadResourceResult, error)
}

// readResourceParams are the params of the runtime's read_resource host call.
type readResourceParams struct {
	Server string `json:"server,omitempty"`
	URI    string `json:"uri"`
}

// ReadResource reads uri from server (resources/read) for the execution's
// tenant. It counts against the execution's calls like a tool call and is
// recorded as the server's "read_resource"; the tenant's allowed servers
// apply, the Before hook sees it as a call of tool "read_resource" with
// arguments {"uri": uri} (so policies and guards can allow or deny it, and
// PII tokens in the URI are restored), and the result is held to the
// server's max_result_size. The value
// is the resource's contents as MCP lists them: objects with uri, mimeType
// and text or blob (base64).
func (e *Execution) ReadResource(ctx context.Context, server, uri string) (json.RawMessage, error) {
	return e.counted(ctx, server, MethodReadResource, fmt.Sprintf("%s was not read from %s", uri, server),
		func(ctx context.Context) (json.RawMessage, error) { return e.readResource(ctx, server, uri) })
}

// counted runs a request of the execution other than a tool call (a
// resource read, a prompt) as a call: it takes one of max_tool_calls
// (refused, skipped says what was not done), and is recorded as the
// server's method.
func (e *Execution) counted(ctx context.Context, server, method, skipped string, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	e.mu.Lock()
	if e.started >= e.opts.MaxCalls {
		e.refused++
		e.mu.Unlock()
		return nil, &sandbox.CallError{Type: TypeCallLimit, Message: fmt.Sprintf(
			"this execution reached its limit of %d tool calls; %s", e.opts.MaxCalls, skipped)}
	}
	e.started++
	e.mu.Unlock()

	start := time.Now()
	called := &Called{}
	out, err := fn(WithCalled(ctx, called))
	rec := CallRecord{Server: server, Tool: method, Start: start, Duration: time.Since(start), OK: err == nil, Approval: called.note()}
	if err != nil {
		var ce *sandbox.CallError
		if errors.As(err, &ce) {
			rec.ErrorType, rec.Error = ce.Type, ce.Message
		} else {
			rec.ErrorType, rec.Error = "Canceled", err.Error()
		}
	}
	e.mu.Lock()
	e.calls = append(e.calls, rec)
	e.mu.Unlock()
	return out, err
}

func (e *Execution) readResource(ctx context.Context, server, uri string) (json.RawMessage, error) {
	if _, known := e.b.cat.Server(server); !known || (e.opts.AllowedServers != nil && !slices.Contains(e.opts.AllowedServers, server)) {
		return nil, &sandbox.CallError{Type: TypeToolNotFound, Message: e.b.notFound(server, "", e.opts.AllowedServers, false)}
	}
	if e.opts.Before != nil {
		args, err := json.Marshal(readResourceParams{URI: uri})
		if err != nil {
			return nil, err
		}
		if args, err = e.opts.Before(ctx, server, MethodReadResource, args); err != nil {
			var ce *sandbox.CallError
			if errors.As(err, &ce) {
				return nil, ce
			}
			return nil, &sandbox.CallError{Type: TypeToolError, Message: err.Error()}
		}
		var p readResourceParams
		if err := json.Unmarshal(args, &p); err != nil || p.URI == "" {
			return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: "read_resource: the guards left no uri to read"}
		}
		uri = p.URI
	}
	return e.b.readResource(ctx, e.opts.Tenant, server, uri, e.opts.SignIn)
}

func (b *Bridge) readResource(ctx context.Context, tenant, server, uri string, signIn SignInFunc) (json.RawMessage, error) {
	rr, ok := b.cat.(ResourceReader)
	if !ok {
		return nil, &sandbox.CallError{Type: TypeToolError, Message: "this daemon's catalog cannot read upstream resources"}
	}
	res, err := rr.ReadResource(ctx, tenant, server, uri)
	if err != nil {
		res, err = afterSignIn(ctx, err, signIn, func() (*mcp.ReadResourceResult, error) {
			return rr.ReadResource(ctx, tenant, server, uri)
		})
	}
	if err != nil {
		return nil, callError(ctx, err)
	}
	var size int64
	for _, c := range res.Contents {
		switch c := c.(type) {
		case mcp.TextResourceContents:
			size += int64(len(c.Text))
		case mcp.BlobResourceContents:
			size += int64(len(c.Blob))
		}
	}
	if limit := b.limits.forServer(server).MaxResult; size > limit {
		return nil, &sandbox.CallError{Type: TypeResultTooLarge, Message: fmt.Sprintf(
			"%s of server %s is %s, over the limit of %s per call (max_result_size)", uri, server, formatSize(size), formatSize(limit))}
	}
	if res.Contents == nil {
		return json.RawMessage("[]"), nil
	}
	return json.Marshal(res.Contents)
}

// handleReadResource serves the read_resource host call.
func (e *Execution) handleReadResource(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var p readResourceParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: fmt.Sprintf("read_resource: malformed params: %v", err)}
	}
	if p.Server == "" || p.URI == "" {
		return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: "read_resource: server and uri must be non-empty strings"}
	}
	return e.ReadResource(ctx, p.Server, p.URI)
}
