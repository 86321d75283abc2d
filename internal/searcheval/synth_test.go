package searcheval

import (
	"encoding/json"
	"testing"

	"github.com/cexec/cexec/pluginapi/selector"
)

func TestSynthesize(t *testing.T) {
	base := []selector.Document{
		ToolDocument("fs", "read_file", "Read a file from disk. Returns its text.", json.RawMessage(`{"properties":{"path":{}}}`)),
		ToolDocument("web", "fetch", "Fetch a URL and return markdown.", nil),
	}
	docs := Synthesize(base, 1001, 7)
	if len(docs) != 1001 {
		t.Fatalf("%d docs", len(docs))
	}
	ids := map[string]bool{}
	servers := map[string]bool{}
	for _, d := range docs {
		if ids[d.ID] {
			t.Fatalf("duplicate id %s", d.ID)
		}
		ids[d.ID] = true
		servers[d.Server] = true
		if d.ContentHash == "" {
			t.Fatalf("%s has no hash", d.ID)
		}
	}
	if docs[0].ID != base[0].ID || docs[1].ID != base[1].ID {
		t.Fatal("the base tools must come first, unchanged")
	}
	if len(servers) < 500 {
		t.Fatalf("only %d servers for 1001 tools", len(servers))
	}
	again := Synthesize(base, 1001, 7)
	for i := range docs {
		if docs[i].ID != again[i].ID || docs[i].Description != again[i].Description {
			t.Fatalf("not deterministic at %d", i)
		}
	}
	if other := Synthesize(base, 1001, 8); other[500].Description == docs[500].Description && other[777].Description == docs[777].Description {
		t.Fatal("the seed changes nothing")
	}
	if Synthesize(nil, 10, 1) != nil || Synthesize(base, 0, 1) != nil {
		t.Fatal("empty input must give nothing")
	}
}
