package selector

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/cexec/cexec/pluginapi"
	commonv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/common/v1"
	selectorv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/selector/v1"
)

// GRPCPlugin is the go-plugin glue for selectors. In a plugin, set Impl and
// pass it to Serve; in the host, register a zero GRPCPlugin and the value
// Dispense returns is a Selector that talks to the plugin.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin's selector; only the plugin side sets it.
	Impl Selector
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers Impl on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("selector plugin: GRPCPlugin.Impl is nil")
	}
	selectorv1.RegisterSelectorServer(s, &server{impl: p.Impl})
	return nil
}

// GRPCClient returns a Selector backed by the plugin's gRPC connection.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	rpc := selectorv1.NewSelectorClient(c)
	return &client{BaseClient: pluginapi.BaseClient{RPC: rpc}, rpc: rpc}, nil
}

// Serve runs impl as a selector plugin until the host stops it. Call it from
// the plugin's main.
func Serve(impl Selector) {
	pluginapi.Serve(pluginapi.KindSelector, &GRPCPlugin{Impl: impl})
}

// client implements Selector over gRPC, on the host side.
type client struct {
	pluginapi.BaseClient
	rpc selectorv1.SelectorClient
}

func (c *client) Index(ctx context.Context, req IndexRequest) (IndexResponse, error) {
	in := &selectorv1.IndexRequest{Deletes: req.Deletes, Reset_: req.Reset}
	for _, d := range req.Upserts {
		in.Upserts = append(in.Upserts, &selectorv1.Document{
			Id:              d.ID,
			Kind:            d.Kind,
			Server:          d.Server,
			Name:            d.Name,
			Description:     d.Description,
			InputSchemaJson: d.InputSchema,
			ContentHash:     d.ContentHash,
		})
	}
	resp, err := c.rpc.Index(ctx, in)
	if err != nil {
		return IndexResponse{}, pluginapi.FromStatusContext(ctx, err)
	}
	return IndexResponse{
		Documents:   resp.GetDocuments(),
		Diagnostics: pluginapi.DiagnosticsFromProto(resp.GetDiagnostics()),
	}, nil
}

func (c *client) Search(ctx context.Context, req SearchRequest) (SearchResponse, error) {
	resp, err := c.rpc.Search(ctx, &selectorv1.SearchRequest{
		Query:   req.Query,
		Limit:   int32(min(max(req.Limit, 0), 1<<31-1)),
		Servers: req.Servers,
		Kinds:   req.Kinds,
	})
	if err != nil {
		return SearchResponse{}, pluginapi.FromStatusContext(ctx, err)
	}
	out := SearchResponse{Diagnostics: pluginapi.DiagnosticsFromProto(resp.GetDiagnostics())}
	for _, h := range resp.GetHits() {
		out.Hits = append(out.Hits, Hit{ID: h.GetId(), Score: h.GetScore()})
	}
	return out, nil
}

// server exposes a Selector on the plugin's gRPC server.
type server struct {
	selectorv1.UnimplementedSelectorServer
	impl Selector
}

func (s *server) Info(ctx context.Context, _ *commonv1.InfoRequest) (*commonv1.PluginInfo, error) {
	return pluginapi.HandleInfo(ctx, s.impl)
}

func (s *server) Configure(ctx context.Context, req *commonv1.ConfigureRequest) (*commonv1.ConfigureResponse, error) {
	return pluginapi.HandleConfigure(ctx, s.impl, req)
}

func (s *server) Index(ctx context.Context, in *selectorv1.IndexRequest) (*selectorv1.IndexResponse, error) {
	req := IndexRequest{Deletes: in.GetDeletes(), Reset: in.GetReset_()}
	for _, d := range in.GetUpserts() {
		req.Upserts = append(req.Upserts, Document{
			ID:          d.GetId(),
			Kind:        d.GetKind(),
			Server:      d.GetServer(),
			Name:        d.GetName(),
			Description: d.GetDescription(),
			InputSchema: d.GetInputSchemaJson(),
			ContentHash: d.GetContentHash(),
		})
	}
	resp, err := s.impl.Index(ctx, req)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &selectorv1.IndexResponse{
		Documents:   resp.Documents,
		Diagnostics: pluginapi.DiagnosticsToProto(resp.Diagnostics),
	}, nil
}

func (s *server) Search(ctx context.Context, in *selectorv1.SearchRequest) (*selectorv1.SearchResponse, error) {
	resp, err := s.impl.Search(ctx, SearchRequest{
		Query:   in.GetQuery(),
		Limit:   int(in.GetLimit()),
		Servers: in.GetServers(),
		Kinds:   in.GetKinds(),
	})
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &selectorv1.SearchResponse{Diagnostics: pluginapi.DiagnosticsToProto(resp.Diagnostics)}
	for _, h := range resp.Hits {
		out.Hits = append(out.Hits, &selectorv1.Hit{Id: h.ID, Score: h.Score})
	}
	return out, nil
}
