// Package control implements cexecd's gRPC control API (api/cexec/v1), the
// API cexecctl and the Go client SDK speak over the daemon's unix socket.
//
// The server depends only on the small interfaces below; package daemon
// adapts the plugin host, the config and (when wired) the execution pipeline
// to them.
package control

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi"
)

// Plugin states reported in PluginState.Status.
const (
	StateOK         = "ok"
	StateStarting   = "starting"
	StateRestarting = "restarting"
	StateFailed     = "failed"
	StateDisabled   = "disabled"
)

// PluginState is one configured plugin as the control API reports it.
type PluginState struct {
	Kind       string
	Name       string
	Version    string
	APIVersion string
	// Status is one of the State* constants.
	Status    string
	Restarts  int
	PID       int
	LastError string
	Required  bool
}

// Plugins is the view of the plugin host the server needs.
type Plugins interface {
	// PluginStates lists every configured plugin, in config order.
	PluginStates() []PluginState
	// Ping calls Info on one plugin. It returns an error wrapping
	// pluginapi.ErrNotFound when no such plugin is configured.
	Ping(ctx context.Context, kind, name string) (pluginapi.Info, error)
}

// Config is the view of the daemon's configuration the server needs.
type Config interface {
	// Path is the config file the daemon loaded ("" for built-in defaults).
	Path() string
	// MaskedJSON is the effective config with secrets masked.
	MaskedJSON() ([]byte, error)
	// Check loads and checks the config file at path ("" means the daemon's
	// own) and returns the path it checked and every diagnostic.
	Check(ctx context.Context, path string) (string, hcl.Diagnostics)
}

// Executor runs code for Exec, sending output events as they happen and the
// result event last.
type Executor interface {
	Exec(ctx context.Context, req *cexecv1.ExecRequest, send func(*cexecv1.ExecEvent) error) error
}

// MCPState is where the MCP face serves, or why it does not.
type MCPState struct {
	// Socket is the private unix socket, "" when not served.
	Socket string
	// SocketOff says why the socket is not served and how to fix it.
	SocketOff string
	// Listen is the TCP address, "" without one.
	Listen string
}

// Deps is what the server reports on and delegates to.
type Deps struct {
	Version string
	Started time.Time
	Socket  string
	PID     int
	// MCP is fixed once the face listens, before the control API serves.
	MCP     MCPState
	Plugins Plugins
	Config  Config
	// Exec may be nil while no sandbox backend is wired; Exec then answers
	// codes.Unimplemented.
	Exec Executor
	// Tasks may be nil while no task pipeline is wired; ExecuteTask then
	// answers codes.Unimplemented.
	Tasks TaskRunner
	// Workspaces serves state, sessions, skills and tenants; nil answers
	// codes.Unimplemented.
	Workspaces Workspaces
	// DefaultTenant is the tenant of workspace requests that name none.
	DefaultTenant string
	// Pool may be nil while no sandbox backend runs; PoolStatus then
	// answers codes.FailedPrecondition.
	Pool Pool
	// Tools and Search may be nil; their RPCs then answer
	// codes.Unimplemented.
	Tools  Tools
	Search Searcher
	Log    hclog.Logger
}

// Server is the Control service.
type Server struct {
	cexecv1.UnimplementedControlServer
	d Deps
}

// New returns a server over d.
func New(d Deps) *Server {
	if d.Log == nil {
		d.Log = hclog.NewNullLogger()
	}
	return &Server{d: d}
}

// Register adds the Control service, and the services beside it, to g.
func (s *Server) Register(g *grpc.Server) {
	cexecv1.RegisterControlServer(g, s)
	cexecv1.RegisterStateVersionsServer(g, stateVersions{s: s})
}

// Status reports version, uptime, config file, socket, pid, a summary of
// the plugins' states and where the MCP face serves.
func (s *Server) Status(context.Context, *cexecv1.StatusRequest) (*cexecv1.StatusResponse, error) {
	sum := &cexecv1.PluginSummary{}
	for _, p := range s.d.Plugins.PluginStates() {
		sum.Total++
		switch p.Status {
		case StateOK:
			sum.Ok++
		case StateFailed:
			sum.Failed++
		case StateRestarting:
			sum.Restarting++
		}
	}
	return &cexecv1.StatusResponse{
		Version:       s.d.Version,
		StartedUnixMs: s.d.Started.UnixMilli(),
		UptimeMs:      time.Since(s.d.Started).Milliseconds(),
		ConfigFile:    s.d.Config.Path(),
		Socket:        s.d.Socket,
		Pid:           int32(s.d.PID),
		Plugins:       sum,
		Goroutines:    int32(runtime.NumGoroutine()),
		Mcp: &cexecv1.McpStatus{
			Socket:    s.d.MCP.Socket,
			SocketOff: s.d.MCP.SocketOff,
			Listen:    s.d.MCP.Listen,
		},
	}, nil
}

// ListPlugins returns every configured plugin's state.
func (s *Server) ListPlugins(context.Context, *cexecv1.ListPluginsRequest) (*cexecv1.ListPluginsResponse, error) {
	states := s.d.Plugins.PluginStates()
	out := make([]*cexecv1.PluginStatus, 0, len(states))
	for _, p := range states {
		out = append(out, &cexecv1.PluginStatus{
			Kind:       p.Kind,
			Name:       p.Name,
			Version:    p.Version,
			ApiVersion: p.APIVersion,
			Status:     p.Status,
			Restarts:   int32(p.Restarts),
			Pid:        int32(p.PID),
			LastError:  p.LastError,
			Required:   p.Required,
		})
	}
	return &cexecv1.ListPluginsResponse{Plugins: out}, nil
}

// PingPlugin calls Info on one plugin and reports how long it took.
func (s *Server) PingPlugin(ctx context.Context, req *cexecv1.PingPluginRequest) (*cexecv1.PingPluginResponse, error) {
	if !pluginapi.ValidKind(req.GetKind()) {
		return nil, status.Errorf(codes.InvalidArgument, "unknown plugin kind %q (want selector, codegen, guard or sandbox)", req.GetKind())
	}
	start := time.Now()
	info, err := s.d.Plugins.Ping(ctx, req.GetKind(), req.GetName())
	if err != nil {
		return nil, pluginapi.ToStatus(fmt.Errorf("ping plugin %s %q: %w", req.GetKind(), req.GetName(), err))
	}
	return &cexecv1.PingPluginResponse{
		Kind:        string(info.Kind),
		Name:        info.Name,
		Version:     info.Version,
		ApiVersions: info.APIVersions,
		LatencyUs:   time.Since(start).Microseconds(),
	}, nil
}

// CheckConfig loads a config file and returns its diagnostics with positions.
func (s *Server) CheckConfig(ctx context.Context, req *cexecv1.CheckConfigRequest) (*cexecv1.CheckConfigResponse, error) {
	path, diags := s.d.Config.Check(ctx, req.GetPath())
	s.d.Log.Debug("config checked", "path", path, "errors", len(diags.Errs()), "diagnostics", len(diags))
	return &cexecv1.CheckConfigResponse{Path: path, Diagnostics: DiagnosticsToProto(diags)}, nil
}

// ShowConfig returns the effective config, secrets masked.
func (s *Server) ShowConfig(context.Context, *cexecv1.ShowConfigRequest) (*cexecv1.ShowConfigResponse, error) {
	b, err := s.d.Config.MaskedJSON()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "render config: %v", err)
	}
	return &cexecv1.ShowConfigResponse{Path: s.d.Config.Path(), ConfigJson: b}, nil
}

// Exec runs code through the executor, streaming its events.
func (s *Server) Exec(req *cexecv1.ExecRequest, stream grpc.ServerStreamingServer[cexecv1.ExecEvent]) error {
	if s.d.Exec == nil {
		return status.Error(codes.Unimplemented, "exec: no sandbox backend wired into cexecd yet")
	}
	if err := checkTimeout(req.GetTimeoutMs()); err != nil {
		return err
	}
	if err := s.d.Exec.Exec(stream.Context(), req, stream.Send); err != nil {
		s.d.Log.Warn("exec failed", "tenant", req.GetTenant(), "session", execSession(req.GetSession(), err), "error", err)
		return pluginapi.ToStatus(err)
	}
	return nil
}

// execSession is the session a failed execution ran in: the executor's
// error names it, made anew when the request named none.
func execSession(asked string, err error) string {
	var s interface{ ExecSession() string }
	if errors.As(err, &s) {
		return s.ExecSession()
	}
	return asked
}

// maxTimeout is the longest run a request's timeout_ms may ask for.
const maxTimeout = config.MaxExecutionTimeout

// checkTimeout refuses a timeout_ms the sandbox would fail on or silently
// take as its default, before a sandbox is taken from the pool.
func checkTimeout(ms int64) error {
	switch {
	case ms < 0:
		return status.Errorf(codes.InvalidArgument, "timeout %s is negative: give a positive one, or none for the sandbox's default", msString(ms))
	case ms > maxTimeout.Milliseconds():
		return status.Errorf(codes.InvalidArgument, "timeout %s is longer than the %s cexecd allows", msString(ms), maxTimeout)
	}
	return nil
}

// msString shows milliseconds as a duration, or as a number where a
// time.Duration would overflow.
func msString(ms int64) string {
	if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
		return fmt.Sprintf("%dms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// DiagnosticsToProto converts HCL diagnostics, keeping file, line and column
// of each subject.
func DiagnosticsToProto(diags hcl.Diagnostics) []*cexecv1.Diagnostic {
	out := make([]*cexecv1.Diagnostic, 0, len(diags))
	for _, d := range diags {
		pd := &cexecv1.Diagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			pd.Severity = "warning"
		}
		if d.Subject != nil {
			pd.Filename = d.Subject.Filename
			pd.Line = int32(d.Subject.Start.Line)
			pd.Column = int32(d.Subject.Start.Column)
		}
		out = append(out, pd)
	}
	return out
}
