package searcheval

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cexec/cexec/pluginapi/selector"
)

func TestScaleSmall(t *testing.T) {
	base := []selector.Document{
		ToolDocument("fs", "read_file", "Read a file from disk.", json.RawMessage(`{"properties":{"path":{}}}`)),
		ToolDocument("web", "fetch", "Fetch a URL.", nil),
	}
	docs := Synthesize(base, 300, 1)
	res, err := Scale(context.Background(), func() (Searcher, error) {
		return NewSelector(context.Background(), nil, nil)
	}, docs, []string{"read a file", "fetch url"}, []int{100, 300}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Tools != 100 || res[1].Tools != 300 || res[1].Searches != 50 || res[1].SearchP99Ms < res[1].SearchP50Ms {
		t.Fatalf("results %+v", res)
	}
	if _, err := Scale(context.Background(), func() (Searcher, error) { return NewPlainBM25(), nil }, docs, []string{"x"}, []int{301}, 1); err == nil {
		t.Fatal("size beyond the corpus accepted")
	}
}

// benchCorpus synthesises n tools from the evaluation sets.
func benchCorpus(b *testing.B, n int) ([]selector.Document, []string) {
	var sets []*Dataset
	for _, name := range []string{"livemcpbench", "metatool-multi", "metatool-single"} {
		sets = append(sets, loadEval(b, name))
	}
	tools, queries := Corpus(sets)
	return Synthesize(tools, n, 1), queries
}

// BenchmarkSearch measures one search (limit 10) of the offline selector,
// cycling through the evaluation queries, at 1,000 and 50,000 tools.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			docs, queries := benchCorpus(b, n)
			ctx := context.Background()
			sel, err := NewSelector(ctx, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := IndexAll(ctx, sel, docs); err != nil {
				b.Fatal(err)
			}
			sel.Search(ctx, selector.SearchRequest{Query: queries[0], Limit: 10})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := sel.Search(ctx, selector.SearchRequest{Query: queries[i%len(queries)], Limit: 10}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkIndex50k measures indexing 50,000 synthesised tools into an
// empty offline selector, first search (which finishes the weights)
// included, and reports the live heap it adds.
func BenchmarkIndex50k(b *testing.B) {
	docs, queries := benchCorpus(b, 50000)
	var last ScaleResult
	for b.Loop() {
		res, err := Scale(context.Background(), func() (Searcher, error) {
			return NewSelector(context.Background(), nil, nil)
		}, docs, queries, []int{50000}, 1)
		if err != nil {
			b.Fatal(err)
		}
		last = res[0]
	}
	b.ReportMetric(last.IndexMiB, "heap-MiB")
	b.ReportMetric(last.IndexCPUSeconds, "cpu-s")
}
