package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/selector"
)

// TestPluginProcess builds the plugin, launches it the way cexecd does
// (go-plugin, gRPC only, AutoMTLS, no inherited environment) and uses it.
func TestPluginProcess(t *testing.T) {
	proc := plugintest.Launch(t, plugintest.Build(t, "."), pluginapi.KindSelector, &selector.GRPCPlugin{})
	if v := proc.Client.NegotiatedVersion(); v != pluginapi.ProtocolVersion {
		t.Errorf("negotiated protocol %d, want %d", v, pluginapi.ProtocolVersion)
	}
	s := proc.Plugin.(selector.Selector)
	ctx := t.Context()

	info := plugintest.CheckInfo(t, s, pluginapi.KindSelector)
	if info.Name != "keyword" || len(info.ConfigSchema.Attributes) != 3 {
		t.Errorf("Info = %+v", info)
	}

	diags, err := s.Configure(ctx, json.RawMessage(`{"max_hits":0}`), selector.APIVersion)
	if err != nil {
		t.Fatal(err)
	}
	if !diags.HasErrors() || diags[0].Attribute != "max_hits" {
		t.Errorf("bad max_hits: diagnostics %+v, want an error about max_hits", diags)
	}
	if _, err := s.Search(ctx, selector.SearchRequest{Query: "file"}); !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Errorf("search after failed configure = %v, want ErrUnavailable", err)
	}
	if diags, err := s.Configure(ctx, json.RawMessage(`{"max_hits":3,"case_sensitive":false,"stopwords":null}`), selector.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", diags, err)
	}

	resp, err := s.Index(ctx, selector.IndexRequest{Upserts: testDocs})
	if err != nil || resp.Documents != int64(len(testDocs)) {
		t.Fatalf("Index = %+v, %v", resp, err)
	}
	hits, err := s.Search(ctx, selector.SearchRequest{Query: "read a file", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []selector.Hit{{ID: "fs/read_file", Score: 1}, {ID: "fs/write_file", Score: 0.5}, {ID: "skills/summarize_file", Score: 0.5}}
	if len(hits.Hits) != len(want) {
		t.Fatalf("hits = %v, want %v", hits.Hits, want)
	}
	for i := range want {
		if hits.Hits[i] != want[i] {
			t.Errorf("hit %d = %v, want %v", i, hits.Hits[i], want[i])
		}
	}

	// The plugin's hclog output reaches the host's logger, at the level the
	// host asked for (go-plugin's own debug line shows mTLS was set up).
	// go-plugin re-logs a JSON line's fields from a map, so their order varies.
	proc.Client.Kill()
	if logs := proc.Logs(); !hasLine(logs, "configured:", "case_sensitive=false", "max_hits=3") ||
		!hasLine(logs, "configuring server automatic mTLS") {
		t.Errorf("host logs lack the plugin's lines; host logs:\n%s", logs)
	}
	if _, err := s.Search(ctx, selector.SearchRequest{Query: "file"}); !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Errorf("search after kill = %v, want ErrPluginShutdown", err)
	}
}

// hasLine reports whether one line of logs contains every part.
func hasLine(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
