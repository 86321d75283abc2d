package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/plugins/selector-embeddings/internal/searcheval"
)

// evaluator runs the evaluations one invocation asked for and prints them.
type evaluator struct {
	cfg json.RawMessage
	log hclog.Logger
	o   options
	out io.Writer
}

// compare scores plain BM25 and a fresh selector on ds.
func (e evaluator) compare(ctx context.Context, ds *searcheval.Dataset) (searcheval.Comparison, error) {
	sel, err := searcheval.NewSelector(ctx, e.cfg, e.log)
	if err != nil {
		return nil, err
	}
	defer sel.Close()
	return searcheval.Compare(ctx, ds, map[string]searcheval.Searcher{
		searcheval.PlainBM25: searcheval.NewPlainBM25(),
		searcheval.Selector:  sel,
	})
}

// quality prints the comparison for each of sets: a table, or JSON keyed
// by dataset (by ranker alone for a -dataset).
func (e evaluator) quality(ctx context.Context, sets []*searcheval.Dataset) error {
	results := map[string]searcheval.Comparison{}
	for _, ds := range sets {
		c, err := e.compare(ctx, ds)
		if err != nil {
			return err
		}
		results[ds.Name] = c
	}
	if e.o.asJSON {
		if e.o.dataset != "" {
			return e.printJSON(results[sets[0].Name])
		}
		return e.printJSON(results)
	}
	e.printQuality(sets, results)
	return nil
}

// qualityAndScale is -dataset with -scale: the dataset's comparison, then
// the scale benchmark on the datasets under -eval-dir.
func (e evaluator) qualityAndScale(ctx context.Context) error {
	ds, err := searcheval.Load(e.o.dataset)
	if err != nil {
		return err
	}
	c, err := e.compare(ctx, ds)
	if err != nil {
		return err
	}
	sets, err := loadSets(e.o.evalDir)
	if err != nil {
		return err
	}
	if !e.o.asJSON {
		e.printQuality([]*searcheval.Dataset{ds}, map[string]searcheval.Comparison{ds.Name: c})
		fmt.Fprintf(e.out, "\nscale: %d tools synthesised from %d datasets, %d searches per size\n", slices.Max(e.o.sizes), len(sets), e.o.searches)
	}
	res, err := e.measureScale(ctx, sets)
	if err != nil {
		return err
	}
	if !e.o.asJSON {
		return e.printScale(res)
	}
	all := map[string]any{"scale": res}
	for ranker, m := range c {
		all[ranker] = m
	}
	return e.printJSON(all)
}

// measureScale indexes and searches catalogues of each -sizes tools
// synthesised from sets.
func (e evaluator) measureScale(ctx context.Context, sets []*searcheval.Dataset) ([]searcheval.ScaleResult, error) {
	tools, queries := searcheval.Corpus(sets)
	docs := searcheval.Synthesize(tools, slices.Max(e.o.sizes), 1)
	return searcheval.Scale(ctx, func() (searcheval.Searcher, error) {
		return searcheval.NewSelector(ctx, e.cfg, e.log)
	}, docs, queries, e.o.sizes, e.o.searches)
}

func (e evaluator) printQuality(sets []*searcheval.Dataset, results map[string]searcheval.Comparison) {
	fmt.Fprintf(e.out, "%-16s %-11s %8s %9s %10s %7s %8s\n", "dataset", "ranker", "NDCG@10", "Recall@5", "Recall@10", "MRR", "queries")
	for _, ds := range sets {
		for _, r := range []string{searcheval.PlainBM25, searcheval.Selector} {
			m := results[ds.Name][r]
			fmt.Fprintf(e.out, "%-16s %-11s %8.4f %9.4f %10.4f %7.4f %8d\n", ds.Name, r, m.NDCG10, m.Recall5, m.Recall10, m.MRR, len(ds.Queries))
		}
	}
}

// printScale prints the scale results, as a table or as {"scale": [...]}.
func (e evaluator) printScale(res []searcheval.ScaleResult) error {
	if e.o.asJSON {
		return e.printJSON(map[string]any{"scale": res})
	}
	fmt.Fprintf(e.out, "%8s %10s %12s %10s %12s %12s %9s\n", "tools", "index_s", "index_cpu_s", "index_MiB", "search_p50", "search_p99", "searches")
	for _, r := range res {
		fmt.Fprintf(e.out, "%8d %10.3f %12.3f %10.1f %10.3fms %10.3fms %9d\n", r.Tools, r.IndexSeconds, r.IndexCPUSeconds, r.IndexMiB, r.SearchP50Ms, r.SearchP99Ms, r.Searches)
	}
	return nil
}

func (e evaluator) printJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
