package pluginapi

import "errors"

// Sentinel errors. Adapters map them to gRPC status codes and back, so a
// plugin returning ErrNotFound makes the host's errors.Is(err, ErrNotFound)
// true, and the other way round.
var (
	// ErrNotFound: the named thing (sandbox, tool, document) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrDenied: a policy refused the request.
	ErrDenied = errors.New("denied")
	// ErrInvalidArgument: the request is malformed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnimplemented: the plugin does not implement this optional call.
	ErrUnimplemented = errors.New("not implemented by this plugin")
	// ErrPluginShutdown: the plugin process exited or is being restarted;
	// the call did not complete.
	ErrPluginShutdown = errors.New("plugin is not running")
	// ErrUnavailable: the plugin cannot do this on this machine right now
	// (a backend that needs hardware it lacks, an endpoint that is down).
	ErrUnavailable = errors.New("unavailable")
	// ErrResourceExhausted: a limit was reached (pool full, quota).
	ErrResourceExhausted = errors.New("resource exhausted")
)
