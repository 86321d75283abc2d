// Package embeddings is the selector-embeddings plugin's implementation of
// selector.Selector: the BM25F ranker of package ranker, optionally fused
// with an OpenAI-compatible embeddings endpoint. The search evaluation
// (package searcheval) runs it in process, exactly as the plugin does.
package embeddings

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/version"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
	"github.com/cexec/cexec/plugins/selector-embeddings/internal/ranker"
)

// Name identifies the plugin in Info.
const Name = "embeddings"

// fusionDepth is how many hits of each ranking take part in fusion, at
// least: deep enough that a document ranked well by one signal only is
// still considered.
const fusionDepth = 100

// Engine implements selector.Selector. It works unconfigured (the offline
// defaults) and is safe for concurrent use.
type Engine struct {
	log hclog.Logger

	// retryBase, when set, replaces the embedding backoff base (tests).
	retryBase time.Duration

	mu    sync.RWMutex
	lex   *ranker.Index
	dense *dense // nil when no embeddings block is configured
	fuseW float64
}

var _ selector.Selector = (*Engine)(nil)

// New returns an engine with the default offline configuration.
func New(log hclog.Logger) *Engine {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	lex, err := ranker.New(ranker.DefaultOptions())
	if err != nil {
		// The defaults are constants that Validate accepts.
		panic(err)
	}
	return &Engine{log: log, lex: lex}
}

// Info describes the plugin and its config schema.
func (e *Engine) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         Name,
		Kind:         pluginapi.KindSelector,
		Version:      version.Version,
		APIVersions:  []string{selector.APIVersion},
		ConfigSchema: Schema(),
	}, nil
}

// Configure validates the plugin block and replaces the engine's state with
// an empty index built with it: the host indexes the catalogue after
// configuring.
func (e *Engine) Configure(_ context.Context, raw json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindSelector, []string{selector.APIVersion}, apiVersion); diags.HasErrors() {
		return diags, nil
	}
	s, diags := parseConfig(raw)
	if diags.HasErrors() {
		return diags, nil
	}
	lex, err := ranker.New(s.lexical)
	if err != nil {
		return append(diags, pluginapi.Errorf("", "Invalid ranker options", err.Error())), nil
	}
	var d *dense
	if s.emb != nil {
		d = newDense(e.log, s.emb, newOpenAIEmbedder(s.emb), e.retryBase)
	}
	e.swap(lex, d, s)
	if s.emb != nil && s.emb.cacheDir == "" {
		e.log.Warn("embeddings cache disabled (cache_dir empty or no user cache directory): every restart re-embeds all tools")
	}
	if s.emb != nil {
		// Never log the API key.
		e.log.Info("embeddings enabled", "base_url", s.emb.baseURL, "model", s.emb.model,
			"cache_dir", s.emb.cacheDir, "fusion_weight", s.emb.fusionWeight, "latency_budget", s.emb.budget.String())
	}
	return diags, nil
}

func (e *Engine) swap(lex *ranker.Index, d *dense, s settings) {
	e.mu.Lock()
	old := e.dense
	e.lex, e.dense = lex, d
	if s.emb != nil {
		e.fuseW = s.emb.fusionWeight
	}
	e.mu.Unlock()
	if old != nil {
		old.close()
	}
}

// Close stops the background embedding worker, if any.
func (e *Engine) Close() {
	e.mu.Lock()
	d := e.dense
	e.dense = nil
	e.mu.Unlock()
	if d != nil {
		d.close()
	}
}

func (e *Engine) parts() (*ranker.Index, *dense, float64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.lex, e.dense, e.fuseW
}

// Index applies upserts and deletes; documents whose content hash is
// unchanged cost nothing. With embeddings, new documents are embedded in
// the background (see WaitIndexed).
func (e *Engine) Index(ctx context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	if err := ctx.Err(); err != nil {
		return selector.IndexResponse{}, err
	}
	lex, d, _ := e.parts()
	docs := make([]ranker.Doc, 0, len(req.Upserts))
	valid := req.Upserts[:0:0]
	var diags pluginapi.Diagnostics
	for i, doc := range req.Upserts {
		if doc.ID == "" {
			diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning,
				Summary: "document without id skipped", Detail: fmt.Sprintf("upsert %d (%s/%s) has no id", i, doc.Server, doc.Name)})
			continue
		}
		valid = append(valid, doc)
		docs = append(docs, ranker.Doc{
			ID: doc.ID, Kind: doc.Kind, Server: doc.Server, Name: doc.Name,
			Description: doc.Description, InputSchema: doc.InputSchema, Hash: doc.ContentHash,
		})
	}
	n := lex.Apply(docs, req.Deletes, req.Reset)
	if d != nil {
		req.Upserts = valid
		d.update(req)
	}
	return selector.IndexResponse{Documents: int64(n), Diagnostics: diags}, nil
}

// WaitIndexed blocks until every indexed document has its embedding (at
// once when embeddings are off), or ctx ends. Evaluations call it so that
// they measure the fused ranking, not a half-embedded catalogue.
func (e *Engine) WaitIndexed(ctx context.Context) error {
	_, d, _ := e.parts()
	if d == nil {
		return nil
	}
	return d.waitIndexed(ctx)
}

// Search ranks documents for the query. With embeddings it embeds the
// query within the latency budget and fuses both rankings; if the endpoint
// fails or is too slow it logs a warning and returns the BM25 ranking, with a
// warning diagnostic saying so.
func (e *Engine) Search(ctx context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	if err := ctx.Err(); err != nil {
		return selector.SearchResponse{}, err
	}
	if req.Limit <= 0 || strings.TrimSpace(req.Query) == "" {
		return selector.SearchResponse{}, nil
	}
	lex, d, w := e.parts()
	filter := ranker.Filter{Servers: req.Servers, Kinds: req.Kinds}
	if d == nil || w == 0 {
		return selector.SearchResponse{Hits: toHits(lex.Search(req.Query, req.Limit, filter))}, nil
	}
	depth := max(req.Limit, fusionDepth)
	lexHits := lex.Search(req.Query, depth, filter)
	qv, err := d.queryVector(ctx, req.Query)
	if err != nil {
		if ctx.Err() != nil {
			return selector.SearchResponse{}, ctx.Err()
		}
		d.warn("query", "query embedding failed or exceeded the latency budget; searching with BM25 only",
			"error", err, "latency_budget", d.s.budget.String())
		return selector.SearchResponse{
			Hits: toHits(lexHits[:min(req.Limit, len(lexHits))]),
			Diagnostics: pluginapi.Diagnostics{{Severity: pluginapi.SeverityWarning,
				Summary: "embeddings unavailable, lexical ranking only", Detail: err.Error()}},
		}, nil
	}
	embHits := d.rank(qv, depth, req.Servers, req.Kinds)
	return selector.SearchResponse{Hits: toHits(fuse(lexHits, embHits, w, req.Limit))}, nil
}

func toHits(hs []ranker.Hit) []selector.Hit {
	out := make([]selector.Hit, len(hs))
	for i, h := range hs {
		out[i] = selector.Hit{ID: h.ID, Score: h.Score}
	}
	return out
}
