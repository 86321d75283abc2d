package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// HostCall is one host call a program made, as Host recorded it.
type HostCall struct {
	Method string
	Params json.RawMessage
}

// Host is a sandbox.Host for tests of sandbox backends: it collects output
// and answers host calls with OnCall. It is safe for concurrent use, as the
// gRPC client adapter requires.
type Host struct {
	// OnCall answers host calls. When nil, every call fails with a
	// *sandbox.CallError of type "HostError".
	OnCall func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	calls  []HostCall
}

var _ sandbox.Host = (*Host)(nil)

// Output appends data to the recorded stdout or stderr.
func (h *Host) Output(s sandbox.Stream, data []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s == sandbox.Stdout {
		h.stdout.Write(data)
	} else {
		h.stderr.Write(data)
	}
	return nil
}

// Call records the call and answers it with OnCall.
func (h *Host) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	h.calls = append(h.calls, HostCall{Method: method, Params: append(json.RawMessage(nil), params...)})
	h.mu.Unlock()
	if h.OnCall == nil {
		return nil, &sandbox.CallError{Type: sandbox.DefaultCallErrorType, Message: "no host call handler in this test"}
	}
	return h.OnCall(ctx, method, params)
}

// Stdout returns everything written to stdout so far.
func (h *Host) Stdout() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stdout.String()
}

// Stderr returns everything written to stderr so far.
func (h *Host) Stderr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// Calls returns the host calls made so far, in arrival order.
func (h *Host) Calls() []HostCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HostCall(nil), h.calls...)
}
