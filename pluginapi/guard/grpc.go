package guard

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/cexec/cexec/internal/maxprocs"
	"github.com/cexec/cexec/pluginapi"
	commonv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/common/v1"
	guardv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/guard/v1"
)

// GRPCPlugin is the go-plugin glue for guards. In a plugin, set Impl and pass
// it to Serve; in the host, register a zero GRPCPlugin and the value Dispense
// returns is a Guard that talks to the plugin. A hook the plugin does not
// implement answers codes.Unimplemented on the wire and
// pluginapi.ErrUnimplemented in the host.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin's guard; only the plugin side sets it.
	Impl Guard
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers Impl on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("guard plugin: GRPCPlugin.Impl is nil")
	}
	guardv1.RegisterGuardServer(s, &server{impl: p.Impl})
	return nil
}

// GRPCClient returns a Guard backed by the plugin's gRPC connection.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	rpc := guardv1.NewGuardClient(c)
	return &client{BaseClient: pluginapi.BaseClient{RPC: rpc}, rpc: rpc}, nil
}

// Serve runs impl as a guard plugin until the host stops it. Call it from the
// plugin's main. Unless GOMAXPROCS is set in the plugin's environment, it
// runs Go code on half of the CPUs (internal/maxprocs), as a sandbox plugin
// does: a guard answers short calls on every model-facing execution's path
// (Detect) and every tool call's (CheckToolCall).
func Serve(impl Guard) {
	maxprocs.Set()
	pluginapi.Serve(pluginapi.KindGuard, &GRPCPlugin{Impl: impl})
}

// client implements Guard over gRPC, on the host side.
type client struct {
	pluginapi.BaseClient
	rpc guardv1.GuardClient
}

func (c *client) CheckCode(ctx context.Context, req CheckCodeRequest) (Decision, error) {
	resp, err := c.rpc.CheckCode(ctx, &guardv1.CheckCodeRequest{Tenant: req.Tenant, Session: req.Session, Code: req.Code})
	if err != nil {
		return Decision{}, pluginapi.FromStatusContext(ctx, err)
	}
	return decisionFromProto(resp), nil
}

func (c *client) CheckToolCall(ctx context.Context, req CheckToolCallRequest) (Decision, error) {
	resp, err := c.rpc.CheckToolCall(ctx, &guardv1.CheckToolCallRequest{
		Tenant:        req.Tenant,
		Session:       req.Session,
		Server:        req.Server,
		Tool:          req.Tool,
		ArgumentsJson: req.Arguments,
	})
	if err != nil {
		return Decision{}, pluginapi.FromStatusContext(ctx, err)
	}
	return decisionFromProto(resp), nil
}

func (c *client) Detect(ctx context.Context, req DetectRequest) ([]Span, error) {
	resp, err := c.rpc.Detect(ctx, &guardv1.DetectRequest{Text: req.Text, Types: req.Types})
	if err != nil {
		return nil, pluginapi.FromStatusContext(ctx, err)
	}
	var spans []Span
	for _, s := range resp.GetSpans() {
		spans = append(spans, Span{Start: int(s.GetStart()), End: int(s.GetEnd()), Type: s.GetType(), Score: s.GetScore()})
	}
	return spans, nil
}

func decisionFromProto(d *guardv1.Decision) Decision {
	return Decision{Allow: d.GetAllow(), Diagnostics: pluginapi.DiagnosticsFromProto(d.GetDiagnostics())}
}

func decisionToProto(d Decision) *guardv1.Decision {
	return &guardv1.Decision{Allow: d.Allow, Diagnostics: pluginapi.DiagnosticsToProto(d.Diagnostics)}
}

// server exposes a Guard on the plugin's gRPC server.
type server struct {
	guardv1.UnimplementedGuardServer
	impl Guard
}

func (s *server) Info(ctx context.Context, _ *commonv1.InfoRequest) (*commonv1.PluginInfo, error) {
	return pluginapi.HandleInfo(ctx, s.impl)
}

func (s *server) Configure(ctx context.Context, req *commonv1.ConfigureRequest) (*commonv1.ConfigureResponse, error) {
	return pluginapi.HandleConfigure(ctx, s.impl, req)
}

func (s *server) CheckCode(ctx context.Context, in *guardv1.CheckCodeRequest) (*guardv1.Decision, error) {
	d, err := s.impl.CheckCode(ctx, CheckCodeRequest{Tenant: in.GetTenant(), Session: in.GetSession(), Code: in.GetCode()})
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return decisionToProto(d), nil
}

func (s *server) CheckToolCall(ctx context.Context, in *guardv1.CheckToolCallRequest) (*guardv1.Decision, error) {
	d, err := s.impl.CheckToolCall(ctx, CheckToolCallRequest{
		Tenant:    in.GetTenant(),
		Session:   in.GetSession(),
		Server:    in.GetServer(),
		Tool:      in.GetTool(),
		Arguments: in.GetArgumentsJson(),
	})
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return decisionToProto(d), nil
}

func (s *server) Detect(ctx context.Context, in *guardv1.DetectRequest) (*guardv1.DetectResponse, error) {
	spans, err := s.impl.Detect(ctx, DetectRequest{Text: in.GetText(), Types: in.GetTypes()})
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &guardv1.DetectResponse{}
	for _, sp := range spans {
		out.Spans = append(out.Spans, &guardv1.Span{Start: int64(sp.Start), End: int64(sp.End), Type: sp.Type, Score: sp.Score})
	}
	return out, nil
}
