package searcheval

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// evalDir is ../shared/eval seen from the module root; tests run in
// internal/searcheval, two levels down.
var evalDir = filepath.Join("..", "..", "..", "shared", "eval")

func loadEval(t testing.TB, name string) *Dataset {
	t.Helper()
	dir := filepath.Join(evalDir, name)
	if _, err := os.Stat(filepath.Join(dir, "queries.jsonl")); err != nil {
		t.Skipf("evaluation set %s not present (%v): it lives beside the repository in ../shared/eval", name, err)
	}
	ds, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func compare(t *testing.T, ds *Dataset) Comparison {
	t.Helper()
	ctx := context.Background()
	sel, err := NewSelector(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	c, err := Compare(ctx, ds, map[string]Searcher{PlainBM25: NewPlainBM25(), Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: plain_bm25 %+v", ds.Name, c[PlainBM25])
	t.Logf("%s: selector   %+v", ds.Name, c[Selector])
	return c
}

// TestSelectorBeatsPlainBM25 holds the quality bar: on
// livemcpbench the offline selector reaches NDCG@10 0.40 and beats plain
// BM25; on metatool-multi it beats plain BM25 by at least 0.05.
func TestSelectorBeatsPlainBM25(t *testing.T) {
	c := compare(t, loadEval(t, "livemcpbench"))
	if c[Selector].NDCG10 <= c[PlainBM25].NDCG10 || c[Selector].NDCG10 < 0.40 {
		t.Errorf("livemcpbench NDCG@10: selector %.4f, plain BM25 %.4f; want selector ≥ 0.40 and above plain",
			c[Selector].NDCG10, c[PlainBM25].NDCG10)
	}
	m := compare(t, loadEval(t, "metatool-multi"))
	if m[Selector].NDCG10 < m[PlainBM25].NDCG10+0.05 {
		t.Errorf("metatool-multi NDCG@10: selector %.4f, plain BM25 %.4f; want at least +0.05",
			m[Selector].NDCG10, m[PlainBM25].NDCG10)
	}
}

func TestNewSelectorRejectsBadConfig(t *testing.T) {
	if _, err := NewSelector(context.Background(), []byte(`{"k1":-1}`), nil); err == nil {
		t.Fatal("bad config accepted")
	}
}
