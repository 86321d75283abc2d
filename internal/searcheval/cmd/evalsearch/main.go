// Command evalsearch prints tool-search quality, plain BM25 next to the
// selector-embeddings engine (run in process), for each dataset under an
// evaluation directory or for one dataset, and with -scale measures indexing
// and search at catalogue scale on tools synthesised from the datasets.
//
//	evalsearch [-eval-dir ../shared/eval | -dataset DIR] [-config cfg.json] [-json]
//	evalsearch -scale [-eval-dir ../shared/eval] [-sizes 1000,50000] [-json]
//
// -config holds the selector's plugin block as JSON (what Configure
// receives); without it the offline defaults run. Output goes to stdout,
// logs to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/searcheval"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "evalsearch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("evalsearch", flag.ContinueOnError)
	evalDir := fs.String("eval-dir", "../shared/eval", "directory whose subdirectories are datasets")
	dataset := fs.String("dataset", "", "evaluate this one dataset directory instead of -eval-dir")
	cfgPath := fs.String("config", "", "JSON file with the selector's plugin configuration")
	asJSON := fs.Bool("json", false, "print JSON")
	scale := fs.Bool("scale", false, "run the scale benchmark instead of the quality evaluation")
	sizes := fs.String("sizes", "1000,50000", "catalogue sizes for -scale")
	searches := fs.Int("searches", 2000, "searches per size for -scale")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg json.RawMessage
	if *cfgPath != "" {
		b, err := os.ReadFile(*cfgPath)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		cfg = b
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "evalsearch", Output: os.Stderr, Level: hclog.Warn})

	var dirs []string
	if *dataset != "" {
		dirs = []string{*dataset}
	} else {
		entries, err := os.ReadDir(*evalDir)
		if err != nil {
			return fmt.Errorf("read eval dir: %w", err)
		}
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(*evalDir, e.Name(), "queries.jsonl")); e.IsDir() && err == nil {
				dirs = append(dirs, filepath.Join(*evalDir, e.Name()))
			}
		}
		if len(dirs) == 0 {
			return fmt.Errorf("no datasets under %s", *evalDir)
		}
	}
	var sets []*searcheval.Dataset
	for _, d := range dirs {
		ds, err := searcheval.Load(d)
		if err != nil {
			return err
		}
		sets = append(sets, ds)
	}

	if *scale {
		return runScale(ctx, sets, cfg, log, *sizes, *searches, *asJSON, out)
	}
	results := map[string]searcheval.Comparison{}
	for _, ds := range sets {
		sel, err := searcheval.NewSelector(ctx, cfg, log)
		if err != nil {
			return err
		}
		c, err := searcheval.Compare(ctx, ds, map[string]searcheval.Searcher{
			searcheval.PlainBM25: searcheval.NewPlainBM25(),
			searcheval.Selector:  sel,
		})
		sel.Close()
		if err != nil {
			return err
		}
		results[ds.Name] = c
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if *dataset != "" {
			return enc.Encode(results[sets[0].Name])
		}
		return enc.Encode(results)
	}
	fmt.Fprintf(out, "%-16s %-11s %8s %9s %10s %7s %8s\n", "dataset", "ranker", "NDCG@10", "Recall@5", "Recall@10", "MRR", "queries")
	for _, ds := range sets {
		for _, r := range []string{searcheval.PlainBM25, searcheval.Selector} {
			m := results[ds.Name][r]
			fmt.Fprintf(out, "%-16s %-11s %8.4f %9.4f %10.4f %7.4f %8d\n", ds.Name, r, m.NDCG10, m.Recall5, m.Recall10, m.MRR, len(ds.Queries))
		}
	}
	return nil
}

func runScale(ctx context.Context, sets []*searcheval.Dataset, cfg json.RawMessage, log hclog.Logger, sizeList string, searches int, asJSON bool, out io.Writer) error {
	var sizes []int
	for _, s := range strings.Split(sizeList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad -sizes entry %q", s)
		}
		sizes = append(sizes, n)
	}
	if searches <= 0 {
		return errors.New("-searches must be > 0")
	}
	tools, queries := searcheval.Corpus(sets)
	docs := searcheval.Synthesize(tools, maxOf(sizes), 1)
	res, err := searcheval.Scale(ctx, func() (searcheval.Searcher, error) {
		return searcheval.NewSelector(ctx, cfg, log)
	}, docs, queries, sizes, searches)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"scale": res})
	}
	fmt.Fprintf(out, "%8s %10s %12s %10s %12s %12s %9s\n", "tools", "index_s", "index_cpu_s", "index_MiB", "search_p50", "search_p99", "searches")
	for _, r := range res {
		fmt.Fprintf(out, "%8d %10.3f %12.3f %10.1f %10.3fms %10.3fms %9d\n", r.Tools, r.IndexSeconds, r.IndexCPUSeconds, r.IndexMiB, r.SearchP50Ms, r.SearchP99Ms, r.Searches)
	}
	return nil
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
