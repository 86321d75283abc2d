package searcheval

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi/selector"
	"github.com/cexec/cexec/plugins/selector-embeddings/engine"
	"github.com/cexec/cexec/plugins/selector-embeddings/ranker"
)

// Searcher is what the evaluation needs from a selector: the selector
// plugin's gRPC client, the in-process plugin implementation and the
// Lexical adapter all satisfy it.
type Searcher interface {
	Index(ctx context.Context, req selector.IndexRequest) (selector.IndexResponse, error)
	Search(ctx context.Context, req selector.SearchRequest) (selector.SearchResponse, error)
}

// BatchSize is how many documents one Index call carries, so that a large
// catalogue stays under gRPC's message size limit.
const BatchSize = 1000

// IndexAll replaces whatever s has indexed with docs, in batches.
func IndexAll(ctx context.Context, s Searcher, docs []selector.Document) error {
	if len(docs) == 0 {
		_, err := s.Index(ctx, selector.IndexRequest{Reset: true})
		return err
	}
	for i := 0; i < len(docs); i += BatchSize {
		batch := docs[i:min(i+BatchSize, len(docs))]
		resp, err := s.Index(ctx, selector.IndexRequest{Upserts: batch, Reset: i == 0})
		if err != nil {
			return fmt.Errorf("index documents %d-%d: %w", i, i+len(batch), err)
		}
		if resp.Diagnostics.HasErrors() {
			return fmt.Errorf("index documents %d-%d: %s", i, i+len(batch), resp.Diagnostics.Error())
		}
	}
	return nil
}

// indexWaiter is implemented by searchers that finish indexing in the
// background (the engine's embeddings); Evaluate waits for them.
type indexWaiter interface {
	WaitIndexed(ctx context.Context) error
}

// Evaluate indexes the dataset's tools into s and scores every query.
func Evaluate(ctx context.Context, s Searcher, ds *Dataset) (Metrics, error) {
	if err := IndexAll(ctx, s, ds.Tools); err != nil {
		return Metrics{}, fmt.Errorf("evaluate %s: %w", ds.Name, err)
	}
	if w, ok := s.(indexWaiter); ok {
		if err := w.WaitIndexed(ctx); err != nil {
			return Metrics{}, fmt.Errorf("evaluate %s: %w", ds.Name, err)
		}
	}
	var acc Accumulator
	for _, q := range ds.Queries {
		resp, err := s.Search(ctx, selector.SearchRequest{Query: q.Text, Limit: Depth})
		if err != nil {
			return Metrics{}, fmt.Errorf("evaluate %s: query %s: %w", ds.Name, q.ID, err)
		}
		ranked := make([]string, len(resp.Hits))
		for i, h := range resp.Hits {
			ranked[i] = h.ID
		}
		acc.Add(ranked, q.Relevant)
	}
	return acc.Mean(), nil
}

// Ranker names in a Comparison.
const (
	PlainBM25 = "plain_bm25"
	Selector  = "selector"
)

// NewSelector returns the selector-embeddings engine, in process, configured
// with cfg exactly as the plugin would be from its cexec.hcl block (JSON;
// empty means the offline defaults). Call Close on it when done.
func NewSelector(ctx context.Context, cfg json.RawMessage, log hclog.Logger) (*engine.Engine, error) {
	e := engine.New(log)
	diags, err := e.Configure(ctx, cfg, selector.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("configure selector: %w", err)
	}
	if diags.HasErrors() {
		return nil, fmt.Errorf("configure selector: %s", diags.Error())
	}
	return e, nil
}

// Comparison is the side-by-side result for one dataset, keyed by ranker
// name ("plain_bm25", "selector"). It marshals to the JSON of
// `cexecctl bench search --json`.
type Comparison map[string]Metrics

// Compare evaluates each named searcher on ds (one after the other: each
// indexes the catalogue afresh).
func Compare(ctx context.Context, ds *Dataset, searchers map[string]Searcher) (Comparison, error) {
	out := Comparison{}
	for name, s := range searchers {
		m, err := Evaluate(ctx, s, ds)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = m
	}
	return out, nil
}

// Lexical adapts a ranker.Index to Searcher.
type Lexical struct {
	Ranker *ranker.Index
}

// NewPlainBM25 returns the baseline: textbook BM25 with no identifier
// splitting (ranker.PlainOptions).
func NewPlainBM25() *Lexical {
	ix, err := ranker.New(ranker.PlainOptions())
	if err != nil {
		// PlainOptions are constants that Validate accepts.
		panic(err)
	}
	return &Lexical{Ranker: ix}
}

// Index applies req to the ranker.
func (l *Lexical) Index(ctx context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	if err := ctx.Err(); err != nil {
		return selector.IndexResponse{}, err
	}
	docs := make([]ranker.Doc, len(req.Upserts))
	for i, d := range req.Upserts {
		docs[i] = RankerDoc(d)
	}
	n := l.Ranker.Apply(docs, req.Deletes, req.Reset)
	return selector.IndexResponse{Documents: int64(n)}, nil
}

// Search ranks with the ranker.
func (l *Lexical) Search(ctx context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	if err := ctx.Err(); err != nil {
		return selector.SearchResponse{}, err
	}
	hits := l.Ranker.Search(req.Query, req.Limit, ranker.Filter{Servers: req.Servers, Kinds: req.Kinds})
	out := make([]selector.Hit, len(hits))
	for i, h := range hits {
		out[i] = selector.Hit{ID: h.ID, Score: h.Score}
	}
	return selector.SearchResponse{Hits: out}, nil
}

// RankerDoc converts a selector document to the ranker's.
func RankerDoc(d selector.Document) ranker.Doc {
	return ranker.Doc{
		ID: d.ID, Kind: d.Kind, Server: d.Server, Name: d.Name,
		Description: d.Description, InputSchema: d.InputSchema, Hash: d.ContentHash,
	}
}
