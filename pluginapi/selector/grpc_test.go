package selector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/selector"
)

// recorder is a selector that remembers what reached it over the wire and
// answers with whatever the test put in it.
type recorder struct {
	mu         sync.Mutex
	config     json.RawMessage
	apiVersion string
	index      selector.IndexRequest
	search     selector.SearchRequest

	info       pluginapi.Info
	configDiag pluginapi.Diagnostics
	indexResp  selector.IndexResponse
	searchResp selector.SearchResponse
	err        error
}

func (r *recorder) Info(context.Context) (pluginapi.Info, error) { return r.info, r.err }

func (r *recorder) Configure(_ context.Context, cfg json.RawMessage, v string) (pluginapi.Diagnostics, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.config, r.apiVersion = cfg, v
	return r.configDiag, r.err
}

func (r *recorder) Index(_ context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index = req
	return r.indexResp, r.err
}

func (r *recorder) Search(_ context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.search = req
	return r.searchResp, r.err
}

func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	impl := &recorder{
		info: pluginapi.Info{
			Name: "rec", Kind: pluginapi.KindSelector, Version: "0.1.0", APIVersions: []string{"v1"},
			ConfigSchema: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{{Name: "max_hits", Type: "number", Required: true}}},
		},
		configDiag: pluginapi.Diagnostics{pluginapi.Errorf("max_hits", "max_hits out of range", "got 0")},
		indexResp:  selector.IndexResponse{Documents: 2, Diagnostics: pluginapi.Diagnostics{{Severity: pluginapi.SeverityWarning, Summary: "empty description"}}},
		searchResp: selector.SearchResponse{Hits: []selector.Hit{{ID: "fs/read", Score: 0.75}, {ID: "skills/x", Score: 0.5}}},
	}
	s := plugintest.Selector(t, impl)

	info := plugintest.CheckInfo(t, s, pluginapi.KindSelector)
	if !reflect.DeepEqual(info, impl.info) {
		t.Errorf("Info = %#v, want %#v", info, impl.info)
	}

	diags, err := s.Configure(ctx, json.RawMessage(`{"max_hits":0}`), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(diags, impl.configDiag) {
		t.Errorf("Configure diagnostics = %#v, want %#v", diags, impl.configDiag)
	}
	if string(impl.config) != `{"max_hits":0}` || impl.apiVersion != "v1" {
		t.Errorf("plugin got config %s version %q", impl.config, impl.apiVersion)
	}

	ireq := selector.IndexRequest{
		Upserts: []selector.Document{
			{ID: "fs/read", Kind: "tool", Server: "fs", Name: "read", Description: "Read a file", InputSchema: json.RawMessage(`{"type":"object"}`), ContentHash: "h1"},
			{ID: "skills/x", Kind: "skill", Name: "x", Description: "does x", ContentHash: "h2"},
		},
		Deletes: []string{"fs/old"},
		Reset:   true,
	}
	iresp, err := s.Index(ctx, ireq)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(impl.index, ireq) {
		t.Errorf("plugin got %#v, want %#v", impl.index, ireq)
	}
	if !reflect.DeepEqual(iresp, impl.indexResp) {
		t.Errorf("Index = %#v, want %#v", iresp, impl.indexResp)
	}

	sreq := selector.SearchRequest{Query: "read a file", Limit: 5, Servers: []string{"fs"}, Kinds: []string{"tool", "skill"}}
	sresp, err := s.Search(ctx, sreq)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(impl.search, sreq) {
		t.Errorf("plugin got %#v, want %#v", impl.search, sreq)
	}
	if !reflect.DeepEqual(sresp, impl.searchResp) {
		t.Errorf("Search = %#v, want %#v", sresp, impl.searchResp)
	}
}

func TestErrorsCrossTheWire(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"invalid argument", fmt.Errorf("query is empty: %w", pluginapi.ErrInvalidArgument)},
		{"unavailable", fmt.Errorf("embeddings endpoint down: %w", pluginapi.ErrUnavailable)},
		{"not found", pluginapi.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := plugintest.Selector(t, &recorder{err: tt.err})
			calls := map[string]func() error{
				"Info":      func() error { _, err := s.Info(t.Context()); return err },
				"Configure": func() error { _, err := s.Configure(t.Context(), nil, "v1"); return err },
				"Index":     func() error { _, err := s.Index(t.Context(), selector.IndexRequest{}); return err },
				"Search":    func() error { _, err := s.Search(t.Context(), selector.SearchRequest{}); return err },
			}
			for name, call := range calls {
				err := call()
				if !errors.Is(err, errors.Unwrap(tt.err)) && !errors.Is(err, tt.err) {
					t.Errorf("%s: error %v does not match %v", name, err, tt.err)
				}
				if err == nil || err.Error() != tt.err.Error() {
					t.Errorf("%s: message %v, want %q", name, err, tt.err.Error())
				}
			}
		})
	}
}

// TestDeadPlugin checks that calls to a plugin whose server has gone away
// fail with ErrPluginShutdown, both when the server stops and when the host
// has closed its side.
func TestDeadPlugin(t *testing.T) {
	tests := []struct {
		name string
		kill func(*plugin.GRPCClient, *plugin.GRPCServer)
	}{
		{"server stopped", func(_ *plugin.GRPCClient, s *plugin.GRPCServer) { s.Stop() }},
		{"connection closed", func(c *plugin.GRPCClient, _ *plugin.GRPCServer) { _ = c.Conn.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, srv := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
				"selector": &selector.GRPCPlugin{Impl: &recorder{}},
			})
			t.Cleanup(func() { srv.Stop(); _ = c.Close() })
			raw, err := c.Dispense("selector")
			if err != nil {
				t.Fatal(err)
			}
			s := raw.(selector.Selector)
			if _, err := s.Search(t.Context(), selector.SearchRequest{Query: "x"}); err != nil {
				t.Fatalf("search before kill: %v", err)
			}
			tt.kill(c, srv)
			_, err = s.Search(t.Context(), selector.SearchRequest{Query: "x"})
			if !errors.Is(err, pluginapi.ErrPluginShutdown) {
				t.Errorf("search after kill: %v, want ErrPluginShutdown", err)
			}
		})
	}
}

// BenchmarkSearch measures one unary call with 20 hits through in-process
// gRPC, conversions included.
func BenchmarkSearch(b *testing.B) {
	impl := &recorder{}
	for i := range 20 {
		impl.searchResp.Hits = append(impl.searchResp.Hits, selector.Hit{ID: fmt.Sprintf("srv/tool_%d", i), Score: 1 / float64(i+1)})
	}
	s := plugintest.Selector(b, impl)
	for b.Loop() {
		if _, err := s.Search(b.Context(), selector.SearchRequest{Query: "read a file", Limit: 20}); err != nil {
			b.Fatal(err)
		}
	}
}
