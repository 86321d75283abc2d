package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func dataset(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tools := `{"server":"fs","name":"readFile","description":"Return the text of a document."}
{"server":"web","name":"fetch","description":"Download a page."}
`
	queries := `{"id":"1","text":"read a file","relevant":["fs/readFile"]}
{"id":"2","text":"download the page","relevant":["web/fetch"]}
`
	os.WriteFile(filepath.Join(dir, "tools.jsonl"), []byte(tools), 0o600)
	os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(queries), 0o600)
	return dir
}

func TestDatasetJSON(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-dataset", dataset(t), "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]float64
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, r := range []string{"plain_bm25", "selector"} {
		for _, k := range []string{"ndcg10", "recall5", "recall10", "mrr"} {
			if _, ok := got[r][k]; !ok {
				t.Fatalf("missing %s.%s in %s", r, k, out.String())
			}
		}
	}
	// Only identifier splitting finds readFile for "read".
	if got["selector"]["mrr"] != 1 || got["plain_bm25"]["mrr"] >= 1 {
		t.Fatalf("unexpected scores: %s", out.String())
	}
}

func TestEvalDirTableAndScale(t *testing.T) {
	dir := dataset(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-eval-dir", filepath.Dir(dir)}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "tiny") || !strings.Contains(out.String(), "selector") {
		t.Fatalf("table: %s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"-eval-dir", filepath.Dir(dir), "-scale", "-sizes", "10,40", "-searches", "5", "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Scale []struct {
			Tools int `json:"tools"`
		} `json:"scale"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Scale) != 2 || got.Scale[1].Tools != 40 {
		t.Fatalf("scale JSON %v: %s", err, out.String())
	}
	if err := run(context.Background(), []string{"-eval-dir", t.TempDir()}, &out); err == nil {
		t.Fatal("empty eval dir accepted")
	}
}
