package embeddings

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi/selector"
	"github.com/cexec/cexec/plugins/selector-embeddings/internal/ranker"
)

// dense holds document vectors and embeds new documents in the background,
// so Index returns at once and a slow or failing endpoint never blocks the
// catalogue; until a document has its vector it is found lexically only.
type dense struct {
	log   hclog.Logger
	s     *embSettings
	emb   embedder
	cache vecCache
	// retryBase and retryLimit shape the backoff between attempts of one
	// batch; roundLimit caps the wait before a failed batch is tried again.
	retryBase, retryLimit, roundLimit time.Duration

	mu      sync.Mutex
	vecs    map[string]docVec
	pending map[string]docText
	// inflight counts batches taken from pending and not yet stored, so
	// waitIndexed does not return while a batch is still on the wire.
	inflight int

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	warnMu sync.Mutex
	warned map[string]time.Time
}

type docText struct {
	key, text    string
	server, kind string
}

type docVec struct {
	key          string
	server, kind string
	v            []float32 // unit length
}

func newDense(log hclog.Logger, s *embSettings, emb embedder, retryBase time.Duration) *dense {
	ctx, cancel := context.WithCancel(context.Background())
	d := &dense{
		log: log, s: s, emb: emb, cache: newVecCache(s.cacheDir, s.model),
		retryBase: 500 * time.Millisecond, retryLimit: 30 * time.Second, roundLimit: 5 * time.Minute,
		vecs: map[string]docVec{}, pending: map[string]docText{},
		kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
		warned: map[string]time.Time{},
	}
	if retryBase > 0 {
		d.retryBase, d.roundLimit = retryBase, 100*retryBase
	}
	go d.run(ctx)
	return d
}

// close stops the background worker and waits for it.
func (d *dense) close() {
	d.cancel()
	<-d.done
}

// embedText is what a document's vector is computed from.
func embedText(doc selector.Document) string {
	f := ranker.Fields(ranker.Doc{Name: doc.Name, Server: doc.Server, Description: doc.Description, InputSchema: doc.InputSchema})
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s", doc.Name, doc.Server, strings.TrimSpace(doc.Description))
	if p := strings.TrimSpace(f[ranker.FieldParamNames]); p != "" {
		fmt.Fprintf(&b, "\nParameters: %s", p)
	}
	s := b.String()
	// Embedding models take a few thousand tokens; the start of a tool's
	// text says what it does.
	const maxText = 6000
	if len(s) > maxText {
		s = strings.ToValidUTF8(s[:maxText], "")
	}
	return s
}

// update mirrors an Index request: unchanged documents keep their vectors,
// cached ones load from disk, the rest queue for the worker.
func (d *dense) update(req selector.IndexRequest) {
	type item struct {
		id  string
		t   docText
		vec []float32
	}
	items := make([]item, len(req.Upserts))
	for i, doc := range req.Upserts {
		text := embedText(doc)
		items[i] = item{id: doc.ID, t: docText{key: cacheKey(d.s.model, text), text: text, server: doc.Server, kind: doc.Kind}}
	}
	d.mu.Lock()
	known := make([]bool, len(items))
	for i, it := range items {
		if v, ok := d.vecs[it.id]; ok && v.key == it.t.key && !req.Reset {
			known[i] = true
		}
	}
	d.mu.Unlock()
	// Disk reads happen outside the lock.
	for i := range items {
		if !known[i] {
			if v, ok := d.cache.get(items[i].t.key); ok {
				items[i].vec = normalize(v)
			}
		}
	}

	d.mu.Lock()
	if req.Reset {
		clear(d.vecs)
		clear(d.pending)
	}
	for _, id := range req.Deletes {
		delete(d.vecs, id)
		delete(d.pending, id)
	}
	queued := false
	for i, it := range items {
		switch {
		case known[i]:
			v := d.vecs[it.id]
			v.server, v.kind = it.t.server, it.t.kind
			d.vecs[it.id] = v
			delete(d.pending, it.id)
		case it.vec != nil:
			d.vecs[it.id] = docVec{key: it.t.key, server: it.t.server, kind: it.t.kind, v: it.vec}
			delete(d.pending, it.id)
		default:
			// The old vector describes old content: drop it rather than
			// rank the new document by it.
			delete(d.vecs, it.id)
			d.pending[it.id] = it.t
			queued = true
		}
	}
	d.mu.Unlock()
	if queued {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// run embeds pending documents in batches until ctx ends.
func (d *dense) run(ctx context.Context) {
	defer close(d.done)
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		}
		for {
			ids, texts := d.take()
			if len(ids) == 0 {
				break
			}
			vecs, err := d.embedBatch(ctx, texts)
			if err != nil {
				d.release(ids, texts, nil)
				if ctx.Err() != nil {
					return
				}
				failures++
				wait := backoff(failures, d.retryBase, d.roundLimit, 0)
				d.warn("documents", "embedding documents failed; they are searched lexically until a retry succeeds",
					"error", err, "documents", len(ids), "retry_in", wait)
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				continue
			}
			failures = 0
			d.release(ids, texts, vecs)
		}
	}
}

// take moves up to batch_size pending documents in flight, in id order.
func (d *dense) take() ([]string, []docText) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(d.pending))
	for id := range d.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = ids[:min(len(ids), d.s.batchSize)]
	texts := make([]docText, len(ids))
	for i, id := range ids {
		texts[i] = d.pending[id]
	}
	d.inflight++
	return ids, texts
}

// release ends an in-flight batch: with vectors it stores them, unless the
// document changed or went away meanwhile; without, the documents stay
// pending. Every vector received goes to the disk cache, keyed by its text.
func (d *dense) release(ids []string, sent []docText, vecs [][]float32) {
	d.mu.Lock()
	d.inflight--
	for i, id := range ids {
		if vecs == nil || len(vecs[i]) == 0 {
			continue
		}
		if t, ok := d.pending[id]; ok && t.key == sent[i].key {
			d.vecs[id] = docVec{key: t.key, server: t.server, kind: t.kind, v: normalize(vecs[i])}
			delete(d.pending, id)
		}
	}
	d.mu.Unlock()
	for i := range ids {
		if vecs == nil || len(vecs[i]) == 0 {
			continue
		}
		if err := d.cache.put(sent[i].key, vecs[i]); err != nil {
			d.warn("cache", "cannot write the embeddings cache", "error", err)
		}
	}
}

// embedBatch embeds texts, retrying transient failures with backoff.
func (d *dense) embedBatch(ctx context.Context, docs []docText) ([][]float32, error) {
	texts := make([]string, len(docs))
	for i, t := range docs {
		texts[i] = t.text
	}
	for attempt := 0; ; attempt++ {
		hctx, hint := withRetryHint(ctx)
		vecs, err := d.emb.embed(hctx, texts)
		if err == nil {
			return vecs, nil
		}
		if attempt >= d.s.maxRetries || !retryable(err) {
			return nil, err
		}
		wait := backoff(attempt, d.retryBase, d.retryLimit, hint.get())
		d.log.Debug("embeddings request failed, backing off", "status", statusCode(err), "attempt", attempt+1, "wait", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// waitIndexed blocks until no document waits for its vector, or ctx ends.
func (d *dense) waitIndexed(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		d.mu.Lock()
		n := len(d.pending) + d.inflight
		d.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for embeddings: %d documents still pending: %w", n, ctx.Err())
		case <-t.C:
		}
	}
}

// queryVector embeds a query within the latency budget, without retries:
// a search must not wait on backoff.
func (d *dense) queryVector(ctx context.Context, q string) ([]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, d.s.budget)
	defer cancel()
	vecs, err := d.emb.embed(ctx, []string{q})
	if err != nil {
		return nil, err
	}
	return normalize(vecs[0]), nil
}

// rank returns the n documents most similar to the unit vector q that
// pass the filter, by cosine similarity (a dot product of unit vectors).
func (d *dense) rank(q []float32, n int, servers, kinds []string) []ranker.Hit {
	d.mu.Lock()
	defer d.mu.Unlock()
	hits := make([]ranker.Hit, 0, len(d.vecs))
	for id, v := range d.vecs {
		if len(v.v) != len(q) ||
			(len(servers) > 0 && !slices.Contains(servers, v.server)) ||
			(len(kinds) > 0 && !slices.Contains(kinds, v.kind)) {
			continue
		}
		var dot float32
		for i, x := range q {
			dot += x * v.v[i]
		}
		hits = append(hits, ranker.Hit{ID: id, Score: float64(dot)})
	}
	slices.SortFunc(hits, func(a, b ranker.Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return hits[:min(n, len(hits))]
}

// warn logs at most once a minute per topic, so an endpoint that is down
// does not flood the daemon's log on every search.
func (d *dense) warn(topic, msg string, args ...any) {
	d.warnMu.Lock()
	last, seen := d.warned[topic]
	now := time.Now()
	if seen && now.Sub(last) < time.Minute {
		d.warnMu.Unlock()
		return
	}
	d.warned[topic] = now
	d.warnMu.Unlock()
	d.log.Warn(msg, args...)
}

func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		return out
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// rrfK is the usual reciprocal-rank-fusion constant (Cormack et al. 2009):
// it damps the difference between the very first ranks.
const rrfK = 60

// fuse combines a lexical and an embedding ranking by weighted reciprocal
// rank fusion: score(d) = (1−w)/(k + rank_lex(d)) + w/(k + rank_emb(d)),
// ranks from 1, a list that misses d contributing 0. RRF uses ranks only,
// so it needs no calibration between BM25 scores (unbounded, growing with
// query length) and cosine similarities (squeezed into a model-specific
// band).
func fuse(lex, emb []ranker.Hit, w float64, limit int) []ranker.Hit {
	score := map[string]float64{}
	for i, h := range lex {
		score[h.ID] += (1 - w) / float64(rrfK+i+1)
	}
	for i, h := range emb {
		score[h.ID] += w / float64(rrfK+i+1)
	}
	out := make([]ranker.Hit, 0, len(score))
	for id, s := range score {
		if s > 0 {
			out = append(out, ranker.Hit{ID: id, Score: s})
		}
	}
	slices.SortFunc(out, func(a, b ranker.Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out[:min(limit, len(out))]
}
