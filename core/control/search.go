package control

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/search"
	"github.com/cexec/cexec/pluginapi"
)

// Searcher is search_tools; *search.Service implements it.
type Searcher interface {
	Search(ctx context.Context, req search.Request) (search.Response, error)
}

// SearchTools finds tools and skills for a query at the detail level asked
// for. Tenant skills are not searched yet (shared skills are).
func (s *Server) SearchTools(ctx context.Context, req *cexecv1.SearchToolsRequest) (*cexecv1.SearchToolsResponse, error) {
	if s.d.Search == nil {
		return nil, status.Error(codes.Unimplemented, "search tools: no search service wired into cexecd")
	}
	res, err := s.d.Search.Search(ctx, search.Request{
		Query:   req.GetQuery(),
		Detail:  req.GetDetailLevel(),
		Limit:   int(req.GetLimit()),
		Servers: req.GetServers(),
	})
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &cexecv1.SearchToolsResponse{Warnings: res.Warnings}
	for _, h := range res.Hits {
		out.Hits = append(out.Hits, &cexecv1.SearchHit{
			Id: h.ID, Kind: h.Kind, Score: h.Score, Server: h.Server, Name: h.Name, Import: h.Import,
			Description: h.Description, StubSource: h.StubSource, InputSchemaJson: h.InputSchema,
		})
	}
	return out, nil
}
