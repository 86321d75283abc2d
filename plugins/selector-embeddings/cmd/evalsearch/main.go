// Command evalsearch prints tool-search quality, plain BM25 next to the
// selector-embeddings engine (run in process), for each dataset under an
// evaluation directory or for one dataset, and with -scale measures indexing
// and search at catalogue scale on tools synthesised from the datasets.
//
//	evalsearch [-eval-dir ../shared/eval | -dataset DIR] [-config cfg.json] [-json]
//	evalsearch -scale [-eval-dir ../shared/eval] [-sizes 1000,50000] [-json]
//	evalsearch -dataset DIR -scale [-eval-dir DIR/..] [-sizes 1000,50000] [-json]
//
// The last form is both: the quality of DIR, then the scale benchmark on
// tools synthesised from every dataset under -eval-dir (by default DIR's
// parent); its JSON is one object with "plain_bm25", "selector" and
// "scale". -config holds the selector's plugin block as JSON (what
// Configure receives); without it the offline defaults run. Output goes to
// stdout, logs to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/plugins/selector-embeddings/internal/searcheval"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "evalsearch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	var cfg json.RawMessage
	if o.configPath != "" {
		if cfg, err = os.ReadFile(o.configPath); err != nil {
			return fmt.Errorf("read config: %w", err)
		}
	}
	e := evaluator{
		cfg: cfg,
		log: hclog.New(&hclog.LoggerOptions{Name: "evalsearch", Output: os.Stderr, Level: hclog.Warn}),
		o:   o,
		out: out,
	}
	switch {
	case o.dataset != "" && o.scale:
		return e.qualityAndScale(ctx)
	case o.scale:
		sets, err := loadSets(o.evalDir)
		if err != nil {
			return err
		}
		res, err := e.measureScale(ctx, sets)
		if err != nil {
			return err
		}
		return e.printScale(res)
	case o.dataset != "":
		ds, err := searcheval.Load(o.dataset)
		if err != nil {
			return err
		}
		return e.quality(ctx, []*searcheval.Dataset{ds})
	default:
		sets, err := loadSets(o.evalDir)
		if err != nil {
			return err
		}
		return e.quality(ctx, sets)
	}
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
