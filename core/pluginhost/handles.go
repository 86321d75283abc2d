package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/selector"
)

// call runs fn on the plugin's current process and explains failures caused
// by that process dying.
func call[T any](ctx context.Context, s *supervised, fn func(impl pluginapi.Base) (T, error)) (T, error) {
	inst, err := s.acquire(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	res, err := fn(inst.impl)
	if err != nil {
		err = s.callError(ctx, inst, err)
	}
	return res, err
}

// Optional hooks a plugin may answer with pluginapi.ErrUnimplemented.
const (
	hookCheckCode uint32 = 1 << iota
	hookCheckToolCall
)

// callHook is call for an optional hook: once the running process has
// answered it with pluginapi.ErrUnimplemented, it is not asked again.
func callHook[T any](ctx context.Context, s *supervised, hook uint32, fn func(impl pluginapi.Base) (T, error)) (T, error) {
	var zero T
	inst, err := s.acquire(ctx)
	if err != nil {
		return zero, err
	}
	if inst.unimplemented.Load()&hook != 0 {
		return zero, pluginapi.ErrUnimplemented
	}
	res, err := fn(inst.impl)
	if errors.Is(err, pluginapi.ErrUnimplemented) {
		inst.unimplemented.Or(hook)
		return zero, err
	}
	if err != nil {
		err = s.callError(ctx, inst, err)
	}
	return res, err
}

// baseHandle routes Info to whichever process currently serves the plugin.
type baseHandle struct{ s *supervised }

// Info asks the running plugin to describe itself.
func (h baseHandle) Info(ctx context.Context) (pluginapi.Info, error) {
	return bounded(ctx, h.s, "Info", func(ctx context.Context) (pluginapi.Info, error) {
		return call(ctx, h.s, func(b pluginapi.Base) (pluginapi.Info, error) { return b.Info(ctx) })
	})
}

// Configure is refused: the host configures plugins from cexec.hcl, and
// reapplies that configuration after every restart, so a configuration set
// through a handle would silently vanish.
func (h baseHandle) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, fmt.Errorf("configure plugin %s: the plugin host configures plugins from cexec.hcl: %w", h.s.id, pluginapi.ErrInvalidArgument)
}

// Selector returns a supervised handle to the selector plugin name.
func (h *Host) Selector(name string) (selector.Selector, error) {
	s, err := h.lookup(pluginapi.KindSelector, name)
	if err != nil {
		return nil, err
	}
	return selectorHandle{baseHandle{s}}, nil
}

// selectorHandle is the supervised selector.Selector.
type selectorHandle struct{ baseHandle }

// Index forwards to the running selector.
func (h selectorHandle) Index(ctx context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	return bounded(ctx, h.s, "Index", func(ctx context.Context) (selector.IndexResponse, error) {
		return call(ctx, h.s, func(b pluginapi.Base) (selector.IndexResponse, error) {
			return b.(selector.Selector).Index(ctx, req)
		})
	})
}

// Search forwards to the running selector.
func (h selectorHandle) Search(ctx context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	return bounded(ctx, h.s, "Search", func(ctx context.Context) (selector.SearchResponse, error) {
		return call(ctx, h.s, func(b pluginapi.Base) (selector.SearchResponse, error) {
			return b.(selector.Selector).Search(ctx, req)
		})
	})
}

// Codegen returns a supervised handle to the codegen plugin name.
func (h *Host) Codegen(name string) (codegen.Codegen, error) {
	s, err := h.lookup(pluginapi.KindCodegen, name)
	if err != nil {
		return nil, err
	}
	return codegenHandle{baseHandle{s}}, nil
}

// codegenHandle is the supervised codegen.Codegen.
type codegenHandle struct{ baseHandle }

// Generate forwards to the running generator.
func (h codegenHandle) Generate(ctx context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
	return bounded(ctx, h.s, "Generate", func(ctx context.Context) (codegen.GenerateResponse, error) {
		return call(ctx, h.s, func(b pluginapi.Base) (codegen.GenerateResponse, error) {
			return b.(codegen.Codegen).Generate(ctx, req)
		})
	})
}

// Guard returns a supervised handle to the guard plugin name.
func (h *Host) Guard(name string) (guard.Guard, error) {
	s, err := h.lookup(pluginapi.KindGuard, name)
	if err != nil {
		return nil, err
	}
	return guardHandle{baseHandle{s}}, nil
}

// guardHandle is the supervised guard.Guard.
type guardHandle struct{ baseHandle }

// CheckCode forwards to the running guard.
func (h guardHandle) CheckCode(ctx context.Context, req guard.CheckCodeRequest) (guard.Decision, error) {
	return bounded(ctx, h.s, "CheckCode", func(ctx context.Context) (guard.Decision, error) {
		return callHook(ctx, h.s, hookCheckCode, func(b pluginapi.Base) (guard.Decision, error) {
			return b.(guard.Guard).CheckCode(ctx, req)
		})
	})
}

// CheckToolCall forwards to the running guard.
func (h guardHandle) CheckToolCall(ctx context.Context, req guard.CheckToolCallRequest) (guard.Decision, error) {
	return bounded(ctx, h.s, "CheckToolCall", func(ctx context.Context) (guard.Decision, error) {
		return callHook(ctx, h.s, hookCheckToolCall, func(b pluginapi.Base) (guard.Decision, error) {
			return b.(guard.Guard).CheckToolCall(ctx, req)
		})
	})
}

// Detect forwards to the running guard.
func (h guardHandle) Detect(ctx context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	return bounded(ctx, h.s, "Detect", func(ctx context.Context) ([]guard.Span, error) {
		return call(ctx, h.s, func(b pluginapi.Base) ([]guard.Span, error) {
			return b.(guard.Guard).Detect(ctx, req)
		})
	})
}

// bounded runs fn under the plugin's timeout when ctx has no deadline of
// its own, as cexec.hcl documents for calls: a plugin that hangs would
// otherwise hold its caller (a guard, the output waiting to be checked; a
// selector, search_tools) for ever. A call cut by that timeout says so and wraps
// context.DeadlineExceeded; the caller's own deadline stays its error.
func bounded[T any](ctx context.Context, s *supervised, method string, fn func(context.Context) (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); ok {
		return fn(ctx)
	}
	timeout := s.cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := cctx.Deadline()
	res, err := fn(cctx)
	// gRPC hands the deadline to the plugin, which may give up and answer
	// (with a cancellation) a moment before the deadline passes here.
	if err != nil && ctx.Err() == nil && (errors.Is(cctx.Err(), context.DeadlineExceeded) || time.Until(deadline) < deadlineSlack) {
		err = fmt.Errorf("plugin %s did not answer %s within its timeout of %s: %w", s.id, method, timeout, context.DeadlineExceeded)
	}
	return res, err
}

// deadlineSlack is how close to the plugin's timeout a failed call counts
// as having run into it.
const deadlineSlack = 100 * time.Millisecond

// Sandbox returns a supervised handle to the sandbox plugin name.
func (h *Host) Sandbox(name string) (sandbox.Sandbox, error) {
	s, err := h.lookup(pluginapi.KindSandbox, name)
	if err != nil {
		return nil, err
	}
	return sandboxHandle{baseHandle{s}}, nil
}

// sandboxHandle is the supervised sandbox.Sandbox.
type sandboxHandle struct{ baseHandle }

// Capabilities forwards to the running backend.
func (h sandboxHandle) Capabilities(ctx context.Context) (sandbox.Capabilities, error) {
	return bounded(ctx, h.s, "Capabilities", func(ctx context.Context) (sandbox.Capabilities, error) {
		return call(ctx, h.s, func(b pluginapi.Base) (sandbox.Capabilities, error) {
			return b.(sandbox.Sandbox).Capabilities(ctx)
		})
	})
}

// Create forwards to the running backend. It is not bounded by the plugin's
// timeout: a backend's start can take longer (a pod's ready_timeout, an
// image pull) and has its own limit.
func (h sandboxHandle) Create(ctx context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	return call(ctx, h.s, func(b pluginapi.Base) (pluginapi.Diagnostics, error) {
		return b.(sandbox.Sandbox).Create(ctx, req)
	})
}

// Exec forwards to the running backend. A backend that dies mid-run
// fails the execution with ErrPluginShutdown; it is not retried, since the
// program may have had effects. Unlike the other calls it is not bounded by
// the plugin's timeout: the execution's own limits bound it.
func (h sandboxHandle) Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	return call(ctx, h.s, func(b pluginapi.Base) (sandbox.ExecResult, error) {
		return b.(sandbox.Sandbox).Exec(ctx, req, host)
	})
}

// Destroy forwards to the running backend.
func (h sandboxHandle) Destroy(ctx context.Context, id string) error {
	_, err := call(ctx, h.s, func(b pluginapi.Base) (struct{}, error) {
		return struct{}{}, b.(sandbox.Sandbox).Destroy(ctx, id)
	})
	return err
}

// List forwards to the running backend.
func (h sandboxHandle) List(ctx context.Context) ([]sandbox.Status, error) {
	return bounded(ctx, h.s, "List", func(ctx context.Context) ([]sandbox.Status, error) {
		return call(ctx, h.s, func(b pluginapi.Base) ([]sandbox.Status, error) {
			return b.(sandbox.Sandbox).List(ctx)
		})
	})
}

// Health forwards to the running backend.
func (h sandboxHandle) Health(ctx context.Context, id string) error {
	_, err := bounded(ctx, h.s, "Health", func(ctx context.Context) (struct{}, error) {
		return call(ctx, h.s, func(b pluginapi.Base) (struct{}, error) {
			return struct{}{}, b.(sandbox.Sandbox).Health(ctx, id)
		})
	})
	return err
}
