// Package guard is the plugin API for guardrails. Every hook is optional: a
// guard that does not implement one returns pluginapi.ErrUnimplemented (embed
// Unimplemented to get that for free). So may a guard whose configuration
// leaves a check hook nothing to do: once a plugin process has answered
// CheckCode or CheckToolCall that way, the host stops calling that hook
// until the process is restarted (and configured again). The host owns tokenization and the
// PII vault; guards only decide and detect, so a restarted guard loses
// nothing.
package guard

import (
	"context"
	"encoding/json"

	"github.com/cexec/cexec/pluginapi"
)

// APIVersion is the guard API version this package implements.
const APIVersion = "v1"

// CheckCodeRequest asks whether code may run. Code is the real program:
// PII tokens the model wrote ([EMAIL_1]) are already replaced by their values.
//
// A guard that fails (an error other than pluginapi.ErrUnimplemented or
// pluginapi.ErrDenied, a crash, a timeout) does not stop the code unless the
// tenant's policy is strict; a guard meant to enforce should deny, not fail.
type CheckCodeRequest struct {
	Tenant  string
	Session string
	Code    string
}

// CheckToolCallRequest asks whether an upstream tool call may go ahead.
type CheckToolCallRequest struct {
	Tenant    string
	Session   string
	Server    string
	Tool      string
	Arguments json.RawMessage
}

// Decision allows or denies; a denial carries diagnostics that say why (their
// error summaries and details reach the agent). The zero Decision denies: set
// Allow to let the code or call go ahead.
type Decision struct {
	Allow       bool
	Diagnostics pluginapi.Diagnostics
}

// DetectRequest asks for sensitive spans in text.
type DetectRequest struct {
	Text string
	// Types restricts detection to these types (EMAIL, PHONE, ...) when set.
	Types []string
}

// Span is a detected value: byte offsets into the UTF-8 text, End exclusive.
// Type names the token the host puts in its place: "ACME_ID" gives
// [ACME_ID_1] (upper-cased, other characters turned into '_'); guards that
// use one name share a numbering.
type Span struct {
	Start int
	End   int
	Type  string
	Score float64
}

// Guard is implemented by guard plugins and, on the host side, by the gRPC
// client that talks to one.
type Guard interface {
	pluginapi.Base
	CheckCode(ctx context.Context, req CheckCodeRequest) (Decision, error)
	CheckToolCall(ctx context.Context, req CheckToolCallRequest) (Decision, error)
	Detect(ctx context.Context, req DetectRequest) ([]Span, error)
}

// Unimplemented answers every optional hook with pluginapi.ErrUnimplemented.
// Embed it in a guard that implements only some hooks.
type Unimplemented struct{}

// CheckCode returns pluginapi.ErrUnimplemented.
func (Unimplemented) CheckCode(context.Context, CheckCodeRequest) (Decision, error) {
	return Decision{}, pluginapi.ErrUnimplemented
}

// CheckToolCall returns pluginapi.ErrUnimplemented.
func (Unimplemented) CheckToolCall(context.Context, CheckToolCallRequest) (Decision, error) {
	return Decision{}, pluginapi.ErrUnimplemented
}

// Detect returns pluginapi.ErrUnimplemented.
func (Unimplemented) Detect(context.Context, DetectRequest) ([]Span, error) {
	return nil, pluginapi.ErrUnimplemented
}
