package main

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/selector"
)

var testDocs = []selector.Document{
	{ID: "fs/read_file", Kind: "tool", Server: "fs", Name: "read_file", Description: "Read the contents of a file from disk"},
	{ID: "fs/write_file", Kind: "tool", Server: "fs", Name: "write_file", Description: "Write text to a file"},
	{ID: "fs/listDirectory", Kind: "tool", Server: "fs", Name: "listDirectory", Description: "List files in a directory"},
	{ID: "web/fetch", Kind: "tool", Server: "web", Name: "fetch", Description: "Fetch a URL and read the page"},
	{ID: "skills/summarize_file", Kind: "skill", Name: "summarize_file", Description: "Summarize a text file"},
}

func newTestSelector(t *testing.T) selector.Selector {
	t.Helper()
	return plugintest.Selector(t, newKeywordSelector(hclog.NewNullLogger()))
}

func TestInfo(t *testing.T) {
	info := plugintest.CheckInfo(t, newTestSelector(t), pluginapi.KindSelector)
	want := map[string]struct {
		typ      string
		required bool
	}{"max_hits": {"number", true}, "case_sensitive": {"bool", false}, "stopwords": {"list(string)", false}}
	if len(info.ConfigSchema.Attributes) != len(want) {
		t.Fatalf("schema has %d attributes, want %d", len(info.ConfigSchema.Attributes), len(want))
	}
	for _, a := range info.ConfigSchema.Attributes {
		if w, ok := want[a.Name]; !ok || w.typ != a.Type || w.required != a.Required {
			t.Errorf("attribute %+v, want %+v", a, w)
		}
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		version  string
		wantAttr string // attribute of the expected error; "-" for none
		wantErr  bool
	}{
		{"minimal", `{"max_hits":10}`, selector.APIVersion, "", false},
		{"full", `{"max_hits":1000,"case_sensitive":true,"stopwords":["the"]}`, selector.APIVersion, "", false},
		{"nulls from hcl", `{"max_hits":1,"case_sensitive":null,"stopwords":null}`, selector.APIVersion, "", false},
		{"zero", `{"max_hits":0}`, selector.APIVersion, "max_hits", true},
		{"too many", `{"max_hits":1001}`, selector.APIVersion, "max_hits", true},
		{"fraction", `{"max_hits":2.5}`, selector.APIVersion, "max_hits", true},
		{"missing", `{}`, selector.APIVersion, "max_hits", true},
		{"empty body", ``, selector.APIVersion, "max_hits", true},
		{"wrong type", `{"max_hits":"ten"}`, selector.APIVersion, "max_hits", true},
		{"unknown attribute", `{"max_hits":5,"colour":"red"}`, selector.APIVersion, "colour", true},
		{"unsupported api version", `{"max_hits":5}`, "v9", "-", true},
		{"no api version", `{"max_hits":5}`, "", "-", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diags, err := newTestSelector(t).Configure(t.Context(), json.RawMessage(tt.config), tt.version)
			if err != nil {
				t.Fatal(err)
			}
			if diags.HasErrors() != tt.wantErr {
				t.Fatalf("diagnostics %v, want errors: %v", diags, tt.wantErr)
			}
			if !tt.wantErr {
				return
			}
			wantAttr := tt.wantAttr
			if wantAttr == "-" {
				wantAttr = ""
			}
			if diags[0].Attribute != wantAttr {
				t.Errorf("diagnostic %+v is about %q, want %q", diags[0], diags[0].Attribute, wantAttr)
			}
		})
	}
}

func TestSearch(t *testing.T) {
	tests := []struct {
		name   string
		config string
		req    selector.SearchRequest
		want   []selector.Hit
	}{
		{
			name:   "name beats description",
			config: `{"max_hits":10}`,
			req:    selector.SearchRequest{Query: "read a file"},
			want: []selector.Hit{
				{ID: "fs/read_file", Score: 1},
				{ID: "fs/write_file", Score: 0.5},
				{ID: "skills/summarize_file", Score: 0.5},
				{ID: "web/fetch", Score: 0.25},
			},
		},
		{
			name:   "max_hits caps the limit",
			config: `{"max_hits":2}`,
			req:    selector.SearchRequest{Query: "read a file", Limit: 50},
			want:   []selector.Hit{{ID: "fs/read_file", Score: 1}, {ID: "fs/write_file", Score: 0.5}},
		},
		{
			name:   "request limit below max_hits",
			config: `{"max_hits":10}`,
			req:    selector.SearchRequest{Query: "read a file", Limit: 1},
			want:   []selector.Hit{{ID: "fs/read_file", Score: 1}},
		},
		{
			name:   "filters",
			config: `{"max_hits":10}`,
			req:    selector.SearchRequest{Query: "file", Servers: []string{"fs"}, Kinds: []string{"tool"}},
			want: []selector.Hit{
				{ID: "fs/read_file", Score: 1},
				{ID: "fs/write_file", Score: 1},
			},
		},
		{
			name:   "kind filter alone",
			config: `{"max_hits":10}`,
			req:    selector.SearchRequest{Query: "file", Kinds: []string{"skill"}},
			want:   []selector.Hit{{ID: "skills/summarize_file", Score: 1}},
		},
		{
			name:   "server filter alone",
			config: `{"max_hits":10}`,
			req:    selector.SearchRequest{Query: "read", Servers: []string{"web"}},
			want:   []selector.Hit{{ID: "web/fetch", Score: 0.5}},
		},
		{
			name:   "camel case names split",
			config: `{"max_hits":10}`,
			req:    selector.SearchRequest{Query: "directory"},
			want:   []selector.Hit{{ID: "fs/listDirectory", Score: 1}},
		},
		{
			name:   "case sensitive",
			config: `{"max_hits":10,"case_sensitive":true}`,
			req:    selector.SearchRequest{Query: "Read"},
			want:   []selector.Hit{{ID: "fs/read_file", Score: 0.5}},
		},
		{
			name:   "custom stopwords replace the defaults",
			config: `{"max_hits":10,"stopwords":["file"]}`,
			req:    selector.SearchRequest{Query: "a file"},
			// "a" is no longer a stopword, "file" is.
			want: []selector.Hit{
				{ID: "fs/listDirectory", Score: 0.5},
				{ID: "fs/read_file", Score: 0.5},
				{ID: "fs/write_file", Score: 0.5},
				{ID: "skills/summarize_file", Score: 0.5},
				{ID: "web/fetch", Score: 0.5},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSelector(t)
			if diags, err := s.Configure(t.Context(), json.RawMessage(tt.config), selector.APIVersion); err != nil || diags.HasErrors() {
				t.Fatalf("configure: %v %v", diags, err)
			}
			if _, err := s.Index(t.Context(), selector.IndexRequest{Upserts: testDocs}); err != nil {
				t.Fatal(err)
			}
			resp, err := s.Search(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp.Hits, tt.want) {
				t.Errorf("hits = %v, want %v", resp.Hits, tt.want)
			}
		})
	}
}

func TestIndexUpdates(t *testing.T) {
	s := newTestSelector(t)
	ctx := t.Context()
	if _, err := s.Search(ctx, selector.SearchRequest{Query: "file"}); !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Errorf("search before configure = %v, want ErrUnavailable", err)
	}
	// Index before Configure, then reconfigure: documents are re-tokenized.
	if _, err := s.Index(ctx, selector.IndexRequest{Upserts: testDocs}); err != nil {
		t.Fatal(err)
	}
	if diags, _ := s.Configure(ctx, json.RawMessage(`{"max_hits":10,"case_sensitive":true}`), selector.APIVersion); diags.HasErrors() {
		t.Fatal(diags)
	}
	search := func(q string) []selector.Hit {
		t.Helper()
		resp, err := s.Search(ctx, selector.SearchRequest{Query: q})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Hits
	}
	if hits := search("Directory"); len(hits) != 1 || hits[0].ID != "fs/listDirectory" {
		t.Errorf("case-sensitive search after reconfigure = %v", hits)
	}

	resp, err := s.Index(ctx, selector.IndexRequest{
		Deletes: []string{"fs/listDirectory"},
		Upserts: []selector.Document{{ID: "web/fetch", Kind: "tool", Server: "web", Name: "fetch", Description: "Download a URL"}, {Name: "no id"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Documents != 4 || len(resp.Diagnostics) != 1 || resp.Diagnostics.HasErrors() {
		t.Errorf("Index = %+v, want 4 documents and one warning", resp)
	}
	if hits := search("Directory"); len(hits) != 0 {
		t.Errorf("deleted document still found: %v", hits)
	}
	if hits := search("Download"); len(hits) != 1 || hits[0].ID != "web/fetch" {
		t.Errorf("updated document not re-indexed: %v", hits)
	}

	resp, err = s.Index(ctx, selector.IndexRequest{Reset: true, Upserts: testDocs[:1]})
	if err != nil || resp.Documents != 1 {
		t.Errorf("reset index = %+v, %v", resp, err)
	}
	r, err := s.Search(ctx, selector.SearchRequest{Query: "the of"})
	if err != nil || len(r.Hits) != 0 || len(r.Diagnostics) != 1 {
		t.Errorf("stopword-only query = %+v, %v; want a warning and no hits", r, err)
	}
}
