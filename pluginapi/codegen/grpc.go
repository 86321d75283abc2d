package codegen

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/cexec/cexec/pluginapi"
	codegenv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/codegen/v1"
	commonv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/common/v1"
)

// GRPCPlugin is the go-plugin glue for code generators. In a plugin, set
// Impl and pass it to Serve; in the host, register a zero GRPCPlugin and the
// value Dispense returns is a Codegen that talks to the plugin.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin's generator; only the plugin side sets it.
	Impl Codegen
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers Impl on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("codegen plugin: GRPCPlugin.Impl is nil")
	}
	codegenv1.RegisterCodegenServer(s, &server{impl: p.Impl})
	return nil
}

// GRPCClient returns a Codegen backed by the plugin's gRPC connection.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	rpc := codegenv1.NewCodegenClient(c)
	return &client{BaseClient: pluginapi.BaseClient{RPC: rpc}, rpc: rpc}, nil
}

// Serve runs impl as a codegen plugin until the host stops it. Call it from
// the plugin's main.
func Serve(impl Codegen) {
	pluginapi.Serve(pluginapi.KindCodegen, &GRPCPlugin{Impl: impl})
}

// client implements Codegen over gRPC, on the host side.
type client struct {
	pluginapi.BaseClient
	rpc codegenv1.CodegenClient
}

func (c *client) Generate(ctx context.Context, req GenerateRequest) (GenerateResponse, error) {
	in := &codegenv1.GenerateRequest{
		Task:             req.Task,
		Language:         req.Language,
		WorkspaceListing: req.WorkspaceListing,
	}
	for _, t := range req.Tools {
		in.Tools = append(in.Tools, &codegenv1.Tool{
			Id:              t.ID,
			Server:          t.Server,
			Name:            t.Name,
			Description:     t.Description,
			Module:          t.Module,
			Function:        t.Function,
			StubSource:      t.StubSource,
			InputSchemaJson: t.InputSchema,
		})
	}
	for _, s := range req.Skills {
		in.Skills = append(in.Skills, &codegenv1.Skill{Name: s.Name, Description: s.Description, Source: s.Source})
	}
	if req.Previous != nil {
		in.Previous = &codegenv1.Attempt{Code: req.Previous.Code, Error: req.Previous.Error}
	}
	resp, err := c.rpc.Generate(ctx, in)
	if err != nil {
		return GenerateResponse{}, pluginapi.FromStatusContext(ctx, err)
	}
	return GenerateResponse{
		Code:        resp.GetCode(),
		Diagnostics: pluginapi.DiagnosticsFromProto(resp.GetDiagnostics()),
		Usage: Usage{
			PromptTokens:     resp.GetUsage().GetPromptTokens(),
			CompletionTokens: resp.GetUsage().GetCompletionTokens(),
		},
		Model: resp.GetModel(),
	}, nil
}

// server exposes a Codegen on the plugin's gRPC server.
type server struct {
	codegenv1.UnimplementedCodegenServer
	impl Codegen
}

func (s *server) Info(ctx context.Context, _ *commonv1.InfoRequest) (*commonv1.PluginInfo, error) {
	return pluginapi.HandleInfo(ctx, s.impl)
}

func (s *server) Configure(ctx context.Context, req *commonv1.ConfigureRequest) (*commonv1.ConfigureResponse, error) {
	return pluginapi.HandleConfigure(ctx, s.impl, req)
}

func (s *server) Generate(ctx context.Context, in *codegenv1.GenerateRequest) (*codegenv1.GenerateResponse, error) {
	req := GenerateRequest{
		Task:             in.GetTask(),
		Language:         in.GetLanguage(),
		WorkspaceListing: in.GetWorkspaceListing(),
	}
	for _, t := range in.GetTools() {
		req.Tools = append(req.Tools, Tool{
			ID:          t.GetId(),
			Server:      t.GetServer(),
			Name:        t.GetName(),
			Description: t.GetDescription(),
			Module:      t.GetModule(),
			Function:    t.GetFunction(),
			StubSource:  t.GetStubSource(),
			InputSchema: t.GetInputSchemaJson(),
		})
	}
	for _, sk := range in.GetSkills() {
		req.Skills = append(req.Skills, Skill{Name: sk.GetName(), Description: sk.GetDescription(), Source: sk.GetSource()})
	}
	if p := in.GetPrevious(); p != nil {
		req.Previous = &Attempt{Code: p.GetCode(), Error: p.GetError()}
	}
	resp, err := s.impl.Generate(ctx, req)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &codegenv1.GenerateResponse{
		Code:        resp.Code,
		Diagnostics: pluginapi.DiagnosticsToProto(resp.Diagnostics),
		Usage: &codegenv1.Usage{
			PromptTokens:     resp.Usage.PromptTokens,
			CompletionTokens: resp.Usage.CompletionTokens,
		},
		Model: resp.Model,
	}, nil
}
