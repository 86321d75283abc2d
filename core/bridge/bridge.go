// Package bridge routes call_tool from sandboxed code to upstream MCP
// servers (ARCHITECTURE §4): it looks the tool up in the catalog, validates
// the arguments against the tool's input schema, calls the server and turns
// the result into the value Python gets, or into a *sandbox.CallError that
// the runtime raises as ToolError.
//
// Use, once per daemon and once per execution:
//
//	b := bridge.New(cat, log, bridge.Limits{})
//	exec := b.NewExecution(bridge.ExecOptions{Tenant: "acme", MaxCalls: 1000})
//	// in the executor's sandbox.Host.Call:
//	return exec.HandleHostCall(ctx, method, params)
//	// in the execution result:
//	summary := exec.Summary()
//
// The bridge does not know how the sandbox reaches it: HandleHostCall takes
// the method and params of the runtime's host call as they arrive.
package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cexec/cexec/core/auth"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/internal/schemamsg"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// CallError types the bridge reports. The Python runtime raises each as
// cexec.ToolError with .type set to it.
const (
	// TypeToolError: the tool ran and reported a failure (isError), or the
	// server answered the call with a JSON-RPC error.
	TypeToolError = "ToolError"
	// TypeToolNotFound: no such server or tool (with a did-you-mean).
	TypeToolNotFound = "ToolNotFound"
	// TypeInvalidArguments: the arguments do not match the input schema.
	TypeInvalidArguments = "InvalidArguments"
	// TypeCallLimit: the execution used up its tool calls.
	TypeCallLimit = "ToolCallLimit"
	// TypeTimeout: the server did not answer within its timeout.
	TypeTimeout = "ToolTimeout"
	// TypeUnavailable: the server is down or its connection was lost during
	// the call; it is being reconnected.
	TypeUnavailable = "ToolUnavailable"
	// TypeArgumentTooLarge: the arguments are over the call's
	// max_argument_size; the server was not called.
	TypeArgumentTooLarge = "ArgumentTooLarge"
	// TypeResultTooLarge: the server's result is over the call's
	// max_result_size and was dropped.
	TypeResultTooLarge = "ResultTooLarge"
	// TypeDenied: the tenant's policy or a guard refused the call (the
	// pipeline's refusal, Python's PermissionError).
	TypeDenied = "PermissionError"
	// TypeSignInRequired: the server is OAuth-protected and the tenant has
	// no usable token; the message says how to sign in.
	TypeSignInRequired = "SignInRequired"
)

// Catalog is what the bridge needs of the tool catalog; *catalog.Catalog
// implements it.
type Catalog interface {
	Tool(server, name string) (catalog.Tool, bool)
	Tools() []catalog.Tool
	Server(name string) (catalog.ServerStatus, bool)
	Call(ctx context.Context, tenant, server, tool string, args json.RawMessage) (*mcp.CallToolResult, error)
}

// Bridge validates and relays tool calls. It is safe for concurrent use.
type Bridge struct {
	cat     Catalog
	log     hclog.Logger
	limits  Limits
	schemas schemas
}

// New returns a bridge over cat whose calls are capped by limits (zero
// values take the defaults). log may be nil.
func New(cat Catalog, log hclog.Logger, limits Limits) *Bridge {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	b := &Bridge{cat: cat, log: log, limits: limits}
	b.schemas = schemas{byID: map[string]*compiled{}, onErr: func(id string, err error) {
		b.log.Warn("input schema does not compile; calls go out unvalidated (the server still validates)", "tool", id, "error", err)
	}}
	return b
}

// CallTool calls server's tool with args (a JSON object; empty means {})
// for tenant (whose own instance serves a tenant-scoped server) and returns
// the result as JSON for the sandbox. Failures the program
// should see are *sandbox.CallError values (Type one of the Type*
// constants); ctx ending is returned as is.
func (b *Bridge) CallTool(ctx context.Context, tenant, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	t, err := b.lookup(server, tool, nil)
	if err != nil {
		return nil, err
	}
	return b.call(ctx, tenant, t, args, nil)
}

// lookup finds an upstream tool; allowed, when not nil, limits the servers
// visible.
func (b *Bridge) lookup(server, tool string, allowed []string) (catalog.Tool, error) {
	visible := allowed == nil || slices.Contains(allowed, server)
	t, ok := b.cat.Tool(server, tool)
	if ok && visible {
		if t.Local != nil {
			return t, &sandbox.CallError{Type: TypeToolNotFound, Message: fmt.Sprintf(
				"%s/%s is a local tool, not an MCP tool: import and call it directly (%s)", server, tool, t.Stub.Import)}
		}
		return t, nil
	}
	if st, ok := b.cat.Server(server); ok && visible && st.State != catalog.StateReady && st.Tools == 0 {
		return t, &sandbox.CallError{Type: TypeUnavailable, Message: fmt.Sprintf(
			"server %s is %s and its tools are not known yet: %s", server, st.State, st.LastError)}
	}
	return t, &sandbox.CallError{Type: TypeToolNotFound, Message: b.notFound(server, tool, allowed, visible)}
}

func (b *Bridge) call(ctx context.Context, tenant string, t catalog.Tool, args json.RawMessage, signIn SignInFunc) (json.RawMessage, error) {
	if err := b.checkArgument(t.ID, t.Server, len(args)); err != nil {
		return nil, err
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = json.RawMessage("{}")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: fmt.Sprintf("%s: arguments are not valid JSON: %v", t.ID, err)}
	}
	if _, ok := inst.(map[string]any); !ok {
		return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: fmt.Sprintf("%s: arguments must be an object (keyword arguments), got %s", t.ID, jsonType(inst))}
	}
	if sch := b.schemas.get(&t); sch != nil {
		var verr *jsonschema.ValidationError
		if err := sch.Validate(inst); errors.As(err, &verr) {
			return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: fmt.Sprintf("invalid arguments for %s: %s", t.ID, schemamsg.Describe(verr))}
		} else if err != nil {
			return nil, &sandbox.CallError{Type: TypeInvalidArguments, Message: fmt.Sprintf("invalid arguments for %s: %v", t.ID, err)}
		}
	}
	res, err := b.cat.Call(ctx, tenant, t.Server, t.Name, args)
	if err != nil {
		res, err = afterSignIn(ctx, err, signIn, func() (*mcp.CallToolResult, error) {
			return b.cat.Call(ctx, tenant, t.Server, t.Name, args)
		})
	}
	if err != nil {
		return nil, callError(ctx, err)
	}
	if err := b.checkResult(t.ID, t.Server, res); err != nil {
		return nil, err
	}
	return decodeResult(res)
}

// callError maps a catalog error to what the program sees.
func callError(ctx context.Context, err error) error {
	var signIn *auth.SignInRequiredError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &signIn):
		return &sandbox.CallError{Type: TypeSignInRequired, Message: err.Error()}
	case errors.Is(err, catalog.ErrTimeout):
		return &sandbox.CallError{Type: TypeTimeout, Message: err.Error()}
	case errors.Is(err, catalog.ErrConnectionLost), errors.Is(err, catalog.ErrUnavailable):
		return &sandbox.CallError{Type: TypeUnavailable, Message: err.Error()}
	case errors.Is(err, catalog.ErrUnknownServer):
		return &sandbox.CallError{Type: TypeToolNotFound, Message: err.Error()}
	}
	return &sandbox.CallError{Type: TypeToolError, Message: err.Error()}
}

// notFound says what is missing and, when something close exists, what
// was probably meant.
func (b *Bridge) notFound(server, tool string, allowed []string, visible bool) string {
	servers := map[string][]catalog.Tool{}
	for _, t := range b.cat.Tools() {
		if t.Local == nil && (allowed == nil || slices.Contains(allowed, t.Server)) {
			servers[t.Server] = append(servers[t.Server], t)
		}
	}
	tools, known := servers[server]
	if !known || !visible {
		msg := fmt.Sprintf("unknown server %q", cutName(server))
		names := make([]string, 0, len(servers))
		for s := range servers {
			names = append(names, s)
		}
		if best := closest(server, names); best != "" {
			return msg + fmt.Sprintf("; did you mean %q?", best)
		}
		slices.Sort(names)
		return msg + fmt.Sprintf("; servers: %s", strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("server %s has no tool %q", server, cutName(tool))
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		// The stub's Python name, written where the MCP name belongs.
		if t.Stub.Function == tool {
			return msg + fmt.Sprintf("; did you mean %q? (%s is the Python function name)", t.Name, tool)
		}
		names = append(names, t.Name)
	}
	if best := closest(tool, names); best != "" {
		return msg + fmt.Sprintf("; did you mean %q?", best)
	}
	for s, ts := range servers {
		if slices.ContainsFunc(ts, func(t catalog.Tool) bool { return t.Name == tool }) {
			return msg + fmt.Sprintf("; server %s has one", s)
		}
	}
	return msg
}

// closest returns the candidate nearest to name by edit distance, if it is
// near enough to be a likely typo.
// maxQuoted is how much of a name notFound quotes: enough to recognise it,
// while a megabyte of junk is not sent back whole.
const maxQuoted = 80

func cutName(s string) string {
	if utf8.RuneCountInString(s) <= maxQuoted {
		return s
	}
	return string([]rune(s)[:maxQuoted-1]) + "…"
}

func closest(name string, candidates []string) string {
	best, bestDist := "", -1
	limit := max(2, len(name)/3)
	lower := strings.ToLower(name)
	for _, c := range candidates {
		d := levenshtein.Distance(lower, strings.ToLower(c), nil)
		if d <= limit && (bestDist < 0 || d < bestDist || d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	return best
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}
