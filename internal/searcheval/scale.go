package searcheval

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/cexec/cexec/pluginapi/selector"
)

// ScaleResult is one size point of the scale benchmark.
type ScaleResult struct {
	Tools int `json:"tools"`
	// IndexSeconds is the wall time to index all tools (in batches of
	// BatchSize) into an empty searcher.
	IndexSeconds float64 `json:"index_seconds"`
	// IndexCPUSeconds is the process CPU time (all threads, GC included)
	// spent indexing: unlike wall time it does not grow when other work
	// competes for the machine. 0 where not measured.
	IndexCPUSeconds float64 `json:"index_cpu_seconds"`
	// IndexMiB is the growth of the live Go heap (runtime.MemStats.HeapAlloc
	// after a forced GC) caused by indexing. It measures the searcher when
	// it runs in this process; for a plugin in another process it only
	// measures the client side.
	IndexMiB float64 `json:"index_mib"`
	// SearchP50Ms and SearchP99Ms are latency percentiles over Searches
	// searches (limit 10) cycling through the benchmark queries.
	SearchP50Ms float64 `json:"search_p50_ms"`
	SearchP99Ms float64 `json:"search_p99_ms"`
	Searches    int     `json:"searches"`
}

// Scale indexes the first size documents of docs into a fresh searcher from
// newSearcher for each size, and measures indexing and searching.
func Scale(ctx context.Context, newSearcher func() (Searcher, error), docs []selector.Document, queries []string, sizes []int, searches int) ([]ScaleResult, error) {
	if len(queries) == 0 {
		return nil, fmt.Errorf("scale benchmark: no queries")
	}
	var out []ScaleResult
	for _, size := range sizes {
		if size > len(docs) {
			return nil, fmt.Errorf("scale benchmark: %d tools asked, %d synthesised", size, len(docs))
		}
		r, err := scaleOne(ctx, newSearcher, docs[:size], queries, searches)
		if err != nil {
			return nil, fmt.Errorf("scale benchmark at %d tools: %w", size, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func scaleOne(ctx context.Context, newSearcher func() (Searcher, error), docs []selector.Document, queries []string, searches int) (ScaleResult, error) {
	r := ScaleResult{Tools: len(docs), Searches: searches}
	settleHeap()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := newSearcher()
	if err != nil {
		return r, err
	}
	start, cpu := time.Now(), processCPU()
	if err := IndexAll(ctx, s, docs); err != nil {
		return r, err
	}
	// Include the first search: the ranker recomputes its weights lazily.
	if _, err := s.Search(ctx, selector.SearchRequest{Query: queries[0], Limit: 1}); err != nil {
		return r, err
	}
	r.IndexSeconds = time.Since(start).Seconds()
	r.IndexCPUSeconds = (processCPU() - cpu).Seconds()
	settleHeap()
	runtime.ReadMemStats(&after)
	r.IndexMiB = max(0, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20))

	// Warm up caches and pools so the percentiles describe steady state.
	for i := range min(len(queries), 20) {
		if _, err := s.Search(ctx, selector.SearchRequest{Query: queries[i], Limit: 10}); err != nil {
			return r, err
		}
	}
	lat := make([]time.Duration, searches)
	for i := range searches {
		t := time.Now()
		if _, err := s.Search(ctx, selector.SearchRequest{Query: queries[i%len(queries)], Limit: 10}); err != nil {
			return r, err
		}
		lat[i] = time.Since(t)
	}
	slices.Sort(lat)
	if searches > 0 {
		r.SearchP50Ms = ms(lat[searches/2])
		r.SearchP99Ms = ms(lat[min(searches-1, searches*99/100)])
	}
	runtime.KeepAlive(s)
	return r, nil
}

// settleHeap collects garbage twice: sync.Pool keeps pools (and whatever
// object embeds them, such as a previous searcher's index) reachable for one
// more cycle through its victim cache.
func settleHeap() {
	runtime.GC()
	runtime.GC()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
