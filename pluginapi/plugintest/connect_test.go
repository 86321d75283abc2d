package plugintest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/selector"
)

// echoSelector answers every search with one hit named after the query.
type echoSelector struct{}

func (echoSelector) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: "echo", Kind: pluginapi.KindSelector, Version: "1.0.0", APIVersions: []string{"v1"}}, nil
}

func (echoSelector) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (echoSelector) Index(context.Context, selector.IndexRequest) (selector.IndexResponse, error) {
	return selector.IndexResponse{}, pluginapi.ErrUnimplemented
}

func (echoSelector) Search(_ context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	return selector.SearchResponse{Hits: []selector.Hit{{ID: req.Query}}}, nil
}

// TestConnectModes serves a selector plainly and through go-plugin's
// multiplexed gRPC broker: calls and error mapping must not differ.
func TestConnectModes(t *testing.T) {
	for name, opts := range map[string][]plugintest.Option{"plain": nil, "multiplexed": {plugintest.Multiplexed()}} {
		t.Run(name, func(t *testing.T) {
			s := plugintest.Selector(t, echoSelector{}, opts...)
			plugintest.CheckInfo(t, s, pluginapi.KindSelector)
			resp, err := s.Search(t.Context(), selector.SearchRequest{Query: "read file"})
			if err != nil || len(resp.Hits) != 1 || resp.Hits[0].ID != "read file" {
				t.Errorf("Search = %+v, %v", resp, err)
			}
			if _, err := s.Index(t.Context(), selector.IndexRequest{}); !errors.Is(err, pluginapi.ErrUnimplemented) {
				t.Errorf("Index = %v, want ErrUnimplemented", err)
			}
		})
	}
}
