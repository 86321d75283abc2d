// Package sandbox is the plugin API for sandbox backends. A backend creates
// sandboxes, runs programs in them, lists and destroys them; the warm pool
// lives in the host. Backends should run programs with the standard runtime in
// pluginapi/sandbox/runtime so that every backend speaks the same in-sandbox
// protocol (runtime.InstallTemp writes it for a sandbox to mount). Registry
// keeps a backend's sandboxes by id, and plugintest.RunSandboxConformance
// checks a backend against what the host relies on.
package sandbox

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// APIVersion is the sandbox API version this package implements.
const APIVersion = "v1"

// Capabilities says what a backend can do on this machine.
type Capabilities struct {
	// Isolation names the mechanism, for example "namespaces" or "microvm".
	Isolation             string
	Network               bool
	PersistentInterpreter bool
	// Available is false when the backend cannot run here;
	// UnavailableReason then says why, plainly.
	Available         bool
	UnavailableReason string
	// RunAs is true when the backend honours CreateRequest.RunAs: it runs
	// the sandbox as that host user, or has no host user to run programs
	// as (a microVM). A backend built before the field reports false, and
	// a host that separates tenants by user refuses it.
	RunAs bool
	// HostMounts is true when the backend binds a mount whose source is a
	// host unix socket into the sandbox: the host then hands each sandbox
	// a direct channel for host calls (ExecRequest.HostToken). Backends
	// without it relay host calls through Exec's Host.
	HostMounts bool
	// SessionInterpreter is true when the backend honours
	// ExecRequest.FreshGlobals.
	SessionInterpreter bool
}

// HostUser is a user and group on the host.
type HostUser struct {
	UID, GID uint32
}

// Mount binds a host path into the sandbox.
type Mount struct {
	Source   string
	Target   string
	ReadOnly bool
}

// Limits bound a sandbox's resources. Zero means the backend's default.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	// Timeout is the default wall-clock limit of one execution.
	Timeout time.Duration
	// OutputBytes caps captured stdout+stderr of one execution.
	OutputBytes int64
	// TmpBytes is the size of the /tmp tmpfs.
	TmpBytes  int64
	CPUsMilli int64
	// ShmBytes is the size of the /dev/shm tmpfs. Its pages, like /tmp's,
	// are charged to the sandbox's memory.
	ShmBytes int64
	// FileBytes is the largest file a program may write (RLIMIT_FSIZE: a
	// write past it fails with EFBIG); 0 means the backend's default.
	FileBytes int64
}

// CreateRequest describes a sandbox to create.
type CreateRequest struct {
	ID      string
	Tenant  string
	Mounts  []Mount
	Limits  Limits
	Env     map[string]string
	Network bool
	// RunAs is the host user the sandbox's processes run as, one per
	// tenant so that tenants cannot reach each other's files or
	// sandboxes on the host; nil means the backend's default. Never root.
	RunAs *HostUser
}

// ExecRequest runs one program in a sandbox.
type ExecRequest struct {
	SandboxID string
	Code      string
	// Timeout overrides the sandbox's default when non-zero.
	Timeout time.Duration
	// Persistent runs in the sandbox's long-lived interpreter instead of a
	// fresh forked child, so globals survive between executions.
	Persistent bool
	Session    string
	// HostToken, when set, is the execution's capability on the host's
	// channel socket (runtime.HostSocket): the runtime hands it to the
	// execution's process only, which then makes its host calls there. The
	// host answers them with the same Host it passes to Exec.
	HostToken string
	// FreshGlobals, with Persistent, runs the program in the session's
	// long-lived interpreter but in new globals, as a forked child would:
	// only the modules earlier executions imported remain. Only for
	// backends whose Capabilities.SessionInterpreter is set; an older one
	// would keep the globals.
	FreshGlobals bool
}

// Stream names an output stream.
type Stream int

// Output streams.
const (
	Stdout Stream = iota + 1
	Stderr
)

// CallError is a failed host call, raised in Python as an exception of
// class Type (for example "ToolError") with Message.
type CallError struct {
	Type    string
	Message string
}

func (e *CallError) Error() string { return e.Type + ": " + e.Message }

// Host is the host's side of one execution, as the backend sees it.
type Host interface {
	// Output delivers a chunk of the program's stdout or stderr.
	Output(stream Stream, data []byte) error
	// Call performs a host call for the program (method "call_tool" with
	// params {"server","tool","arguments"}, and others the host defines)
	// and returns its JSON result. A *CallError is relayed to the program.
	Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// ExecError describes a program that failed.
type ExecError struct {
	// Type is the Python exception class, or Timeout, OutputLimit, Killed.
	Type      string
	Message   string
	Traceback string
}

// Usage is what one execution consumed.
type Usage struct {
	CPU         time.Duration
	MaxRSSBytes int64
}

// ExecResult is the outcome of one execution.
type ExecResult struct {
	ExitCode int
	// Result is what the program passed to cexec.result(), if anything.
	Result          json.RawMessage
	Error           *ExecError
	Duration        time.Duration
	Usage           Usage
	OutputTruncated bool
	TimedOut        bool
	// SandboxOK is false when the sandbox must not be reused (crash, kill,
	// timeout); the pool recycles it.
	SandboxOK bool
	// SessionLost is true when the session's persistent interpreter ended
	// during this execution (the program exited it, or it was killed): its
	// globals are gone, and the session's next persistent execution starts
	// in a new one.
	SessionLost bool
}

// Status describes a live sandbox.
type Status struct {
	ID         string
	Tenant     string
	State      string
	Created    time.Time
	Executions int64
	RSSBytes   int64
}

// Sandbox is implemented by sandbox backend plugins and, on the host side,
// by the gRPC client that talks to one.
type Sandbox interface {
	pluginapi.Base
	Capabilities(ctx context.Context) (Capabilities, error)
	Create(ctx context.Context, req CreateRequest) (pluginapi.Diagnostics, error)
	// Exec runs a program, streaming output and host calls through host,
	// and returns when it ends. Cancelling ctx kills the program.
	Exec(ctx context.Context, req ExecRequest, host Host) (ExecResult, error)
	Destroy(ctx context.Context, id string) error
	List(ctx context.Context) ([]Status, error)
	// Health checks that a sandbox can still run code. Optional: may return
	// pluginapi.ErrUnimplemented.
	Health(ctx context.Context, id string) error
}
