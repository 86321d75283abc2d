package searcheval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeDataset(t *testing.T, tools, queries string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tools.jsonl"), []byte(tools), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(queries), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoad(t *testing.T) {
	dir := writeDataset(t,
		`{"server":"fs","name":"read_file","description":"Read a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"category":"File"}
{"server":"fs","name":"write_file","description":"Write a file."}

`,
		`{"id":"q1","text":"read my notes","relevant":["fs/read_file"]}
`)
	ds, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Tools) != 2 || len(ds.Queries) != 1 || ds.Name != filepath.Base(dir) {
		t.Fatalf("loaded %+v", ds)
	}
	d := ds.Tools[0]
	if d.ID != "fs/read_file" || d.Kind != "tool" || d.ContentHash == "" || !strings.Contains(string(d.InputSchema), "path") {
		t.Fatalf("document %+v", d)
	}
	if ds.Tools[1].ContentHash == d.ContentHash {
		t.Fatal("different tools share a content hash")
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct{ name, tools, queries, want string }{
		{"unknown relevant id", `{"server":"a","name":"b"}`, `{"id":"q","text":"x","relevant":["a/c"]}`, "not in tools.jsonl"},
		{"duplicate tool", `{"server":"a","name":"b"}` + "\n" + `{"server":"a","name":"b"}`, ``, "duplicate tool"},
		{"bad json with line", `{"server":"a","name":"b"}` + "\n{oops", ``, "tools.jsonl:2"},
		{"tool without name", `{"server":"a"}`, ``, "without server or name"},
	}
	for _, tt := range tests {
		_, err := Load(writeDataset(t, tt.tools, tt.queries))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("missing files accepted")
	}
}
