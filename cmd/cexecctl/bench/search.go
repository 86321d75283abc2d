package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/searcheval"
)

type searchFlags struct {
	dataset   string
	evalDir   string
	selector  string
	scale     bool
	sizes     string
	searches  int
	sizesList []int
}

func searchBench(env *cli.Env) *cobra.Command {
	var f searchFlags
	cmd := &cobra.Command{
		Use:   "search --dataset DIR",
		Short: "Tool-search quality (NDCG@10, Recall@5/10, MRR) of plain BM25 and the selector; --scale: index and search at 1,000 and 50,000 tools",
		Long: `Evaluates tool search on a dataset directory holding tools.jsonl and
queries.jsonl (the format of ../shared/eval): plain BM25 without identifier
splitting beside the selector-embeddings engine, both run in this process
exactly as the plugin runs (--selector-config: the plugin block as JSON, what
its Configure receives; default the offline settings).

--json prints one object per ranker, "plain_bm25" and "selector", each with
ndcg10, recall5, recall10 and mrr.

--scale adds "scale": for each of --sizes, a selector indexing that many tools
synthesised by varying the catalogues of every dataset under --eval-dir
(default: the dataset's parent), with index time, CPU and memory, and search
latency p50/p99.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.dataset == "" {
				return cli.UsageErrorf("--dataset DIR is required")
			}
			if f.scale {
				for _, s := range strings.Split(f.sizes, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(s))
					if err != nil || n <= 0 {
						return cli.UsageErrorf("bad --sizes entry %q", s)
					}
					f.sizesList = append(f.sizesList, n)
				}
				if f.searches < 1 {
					return cli.UsageErrorf("--searches must be at least 1")
				}
			}
			out, err := benchSearch(cmd.Context(), env, f)
			if err != nil {
				return err
			}
			if env.JSON {
				return env.PrintJSON(out)
			}
			printSearch(env, out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataset, "dataset", "", "dataset directory (tools.jsonl, queries.jsonl)")
	fl.StringVar(&f.selector, "selector-config", "", "JSON file with the selector plugin's configuration (default: offline settings)")
	fl.BoolVar(&f.scale, "scale", false, "also measure indexing and search at --sizes tools")
	fl.StringVar(&f.evalDir, "eval-dir", "", "with --scale: directory whose datasets are varied into the large catalogue (default: the dataset's parent)")
	fl.StringVar(&f.sizes, "sizes", "1000,50000", "with --scale: catalogue sizes")
	fl.IntVar(&f.searches, "searches", 2000, "with --scale: searches per size")
	return cmd
}

// searchOutput is `bench search --json`: the Comparison's rankers, plus
// "scale" with --scale.
type searchOutput struct {
	name       string
	queries    int
	tools      int
	comparison searcheval.Comparison
	scale      []searcheval.ScaleResult
}

// MarshalJSON flattens the rankers to the top level.
func (o searchOutput) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	for k, v := range o.comparison {
		m[k] = v
	}
	if o.scale != nil {
		m["scale"] = o.scale
	}
	return json.Marshal(m)
}

func benchSearch(ctx context.Context, env *cli.Env, f searchFlags) (*searchOutput, error) {
	var cfg json.RawMessage
	if f.selector != "" {
		b, err := os.ReadFile(f.selector)
		if err != nil {
			return nil, fmt.Errorf("read selector config: %w", err)
		}
		cfg = b
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "bench-search", Output: env.Stderr, Level: hclog.Warn})
	ds, err := searcheval.Load(f.dataset)
	if err != nil {
		return nil, err
	}
	sel, err := searcheval.NewSelector(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	cmp, err := searcheval.Compare(ctx, ds, map[string]searcheval.Searcher{
		searcheval.PlainBM25: searcheval.NewPlainBM25(),
		searcheval.Selector:  sel,
	})
	sel.Close()
	if err != nil {
		return nil, err
	}
	out := &searchOutput{name: ds.Name, queries: len(ds.Queries), tools: len(ds.Tools), comparison: cmp}
	if !f.scale {
		return out, nil
	}
	evalDir := f.evalDir
	if evalDir == "" {
		evalDir = filepath.Dir(filepath.Clean(f.dataset))
	}
	sets, err := loadSets(evalDir)
	if err != nil {
		return nil, err
	}
	tools, queries := searcheval.Corpus(sets)
	largest := 0
	for _, n := range f.sizesList {
		largest = max(largest, n)
	}
	if !env.JSON {
		fmt.Fprintf(env.Stderr, "scale: %d tools synthesised from %d datasets, %d searches per size\n", largest, len(sets), f.searches)
	}
	docs := searcheval.Synthesize(tools, largest, 1)
	out.scale, err = searcheval.Scale(ctx, func() (searcheval.Searcher, error) {
		return searcheval.NewSelector(ctx, cfg, log)
	}, docs, queries, f.sizesList, f.searches)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// loadSets loads every dataset directly under dir.
func loadSets(dir string) ([]*searcheval.Dataset, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read eval dir: %w", err)
	}
	var sets []*searcheval.Dataset
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(p, "queries.jsonl")); !e.IsDir() || err != nil {
			continue
		}
		ds, err := searcheval.Load(p)
		if err != nil {
			return nil, err
		}
		sets = append(sets, ds)
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("no datasets under %s", dir)
	}
	return sets, nil
}

func printSearch(env *cli.Env, o *searchOutput) {
	w := env.Stdout
	fmt.Fprintf(w, "%s: %d tools, %d queries\n", o.name, o.tools, o.queries)
	fmt.Fprintf(w, "%-11s %8s %9s %10s %7s\n", "ranker", "NDCG@10", "Recall@5", "Recall@10", "MRR")
	for _, r := range []string{searcheval.PlainBM25, searcheval.Selector} {
		m := o.comparison[r]
		fmt.Fprintf(w, "%-11s %8.4f %9.4f %10.4f %7.4f\n", r, m.NDCG10, m.Recall5, m.Recall10, m.MRR)
	}
	if o.scale == nil {
		return
	}
	fmt.Fprintf(w, "\n%8s %9s %12s %10s %12s %12s\n", "tools", "index_s", "index_cpu_s", "index_MiB", "search_p50", "search_p99")
	for _, r := range o.scale {
		fmt.Fprintf(w, "%8d %9.3f %12.3f %10.1f %10.3fms %10.3fms\n", r.Tools, r.IndexSeconds, r.IndexCPUSeconds, r.IndexMiB, r.SearchP50Ms, r.SearchP99Ms)
	}
}
