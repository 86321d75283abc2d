// Package ranker is an in-memory BM25F index over tool and skill documents:
// postings lists with precomputed per-posting weights, so a search costs one
// pass over the postings of the query's terms and a bounded heap.
//
// Scoring (Robertson & Zaragoza's BM25F, "simple" variant): for query term t
// and document d,
//
//	tf~(t,d)  = Σ_f w_f · tf_f(t,d) / (1 − b + b · len_f(d) / avglen_f)
//	score(d)  = Σ_t q_t · idf(t) · tf~(t,d) / (k1 + tf~(t,d))
//	idf(t)    = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// with fields f = name, server, summary (first sentence of the description),
// description, parameter names and parameter descriptions, and q_t the query
// weight of t (1 for the user's words, less for expansions; see
// Options.Synonyms). Each hit is then lifted by ServerBoost times the best
// score among the hits of its server.
package ranker

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Filter restricts a search. Empty slices restrict nothing.
type Filter struct {
	Servers []string
	Kinds   []string
}

// Hit is one ranked document.
type Hit struct {
	ID    string
	Score float64
}

// postingList holds one term's postings as parallel slices, sorted by slot,
// so the hot search loop reads only slots and weights.
type postingList struct {
	docs []uint32
	// w is the saturated field-weighted term frequency tf~/(k1+tf~),
	// recomputed when the collection changes.
	w []float32
	// tf are the raw per-field frequencies (saturating at 255) that w is
	// computed from.
	tf [][NumFields]uint8
}

// slotMeta is what a search needs per slot, kept dense and small.
type slotMeta struct {
	server uint32
	kind   uint16
	alive  bool
}

type docInfo struct {
	id   string
	hash string
	lens [NumFields]uint32
	// terms are the document's distinct term ids, to fix df on delete.
	terms []uint32
}

// Index is a BM25F index. It is safe for concurrent use: searches share a
// read lock; Apply takes the write lock.
type Index struct {
	opts Options
	an   *Analyzer
	ex   *expander

	mu    sync.RWMutex
	terms map[string]uint32
	post  []postingList
	df    []uint32
	idf   []float32
	docs  []docInfo
	meta  []slotMeta
	byID  map[string]uint32
	// servers and kinds intern names to small ids for filters and boosts.
	servers intern
	kinds   intern
	live    int
	lenSum  [NumFields]uint64
	// dirty means idf and posting weights are stale; the next search
	// recomputes them once, so a catalogue indexed in many batches pays
	// for one recomputation, not one per batch.
	dirty bool

	scratch sync.Pool
}

type intern struct {
	ids   map[string]uint32
	names []string
}

func (n *intern) id(s string) uint32 {
	if id, ok := n.ids[s]; ok {
		return id
	}
	if n.ids == nil {
		n.ids = map[string]uint32{}
	}
	id := uint32(len(n.names))
	n.ids[s] = id
	n.names = append(n.names, s)
	return id
}

// New returns an empty index.
func New(opts Options) (*Index, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	an := NewAnalyzer(opts.Analyzer)
	ix := &Index{opts: opts, an: an, ex: newExpander(an, opts)}
	ix.resetLocked()
	return ix, nil
}

// Options returns the options the index was built with.
func (ix *Index) Options() Options { return ix.opts }

// Analyzer returns the index's analyzer.
func (ix *Index) Analyzer() *Analyzer { return ix.an }

func (ix *Index) resetLocked() {
	ix.terms = map[string]uint32{}
	ix.post = nil
	ix.df = nil
	ix.idf = nil
	ix.docs = nil
	ix.meta = nil
	ix.byID = map[string]uint32{}
	ix.servers = intern{}
	ix.kinds = intern{}
	ix.live = 0
	ix.lenSum = [NumFields]uint64{}
	ix.dirty = true
}

// Len returns the number of indexed documents.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Hash returns the content hash id is indexed with, if it is indexed.
func (ix *Index) Hash(id string) (string, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	slot, ok := ix.byID[id]
	if !ok {
		return "", false
	}
	return ix.docs[slot].hash, true
}

// Apply drops everything when reset is set, deletes the given ids, then
// upserts docs: a doc whose id is indexed with the same hash is skipped, a
// changed one replaces the old version. It returns the number of documents
// indexed afterwards.
func (ix *Index) Apply(upserts []Doc, deletes []string, reset bool) int {
	// Analyse outside the lock and in parallel: it is most of the work and
	// needs no index state, so searches keep running meanwhile.
	deleted := make(map[string]bool, len(deletes))
	for _, id := range deletes {
		deleted[id] = true
	}
	todo := make([]Doc, 0, len(upserts))
	for _, d := range upserts {
		if d.Hash == "" {
			d.Hash = ContentHash(d)
		}
		if h, ok := ix.Hash(d.ID); ok && h == d.Hash && !reset && !deleted[d.ID] {
			continue
		}
		todo = append(todo, d)
	}
	prepared := ix.prepareAll(todo)

	ix.mu.Lock()
	defer ix.mu.Unlock()
	if reset {
		ix.resetLocked()
	}
	for _, id := range deletes {
		ix.deleteLocked(id)
	}
	for i := range prepared {
		p := &prepared[i]
		if slot, ok := ix.byID[p.id]; ok {
			if ix.docs[slot].hash == p.hash {
				continue
			}
			ix.deleteLocked(p.id)
		}
		ix.addLocked(p)
	}
	if dead := len(ix.docs) - ix.live; dead > 256 && dead > ix.live/2 {
		ix.compactLocked()
	}
	ix.dirty = true
	return ix.live
}

type termFreq struct {
	term string
	tf   [NumFields]uint8
}

type preparedDoc struct {
	id, hash, server, kind string
	lens                   [NumFields]uint32
	terms                  []termFreq
}

// prepareAll analyses docs on up to GOMAXPROCS goroutines.
func (ix *Index) prepareAll(docs []Doc) []preparedDoc {
	out := make([]preparedDoc, len(docs))
	workers := min(runtime.GOMAXPROCS(0), (len(docs)+63)/64)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			w := preparer{ix: ix, tok: map[string]int32{}, termID: map[string]int32{}}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(docs) {
					return
				}
				out[i] = w.prepare(docs[i])
			}
		})
	}
	wg.Wait()
	return out
}

// preparer is one analysis goroutine's state: it maps each distinct token
// to a local term id once, so the per-token work of a batch is one map
// lookup. Its maps may point into the batch's texts and die with it.
type preparer struct {
	ix     *Index
	tok    map[string]int32 // token → local term id, -1 when dropped
	termID map[string]int32 // term → local term id
	terms  []string         // local term id → term
	stamp  []uint32         // local term id → last doc number that had it
	at     []int32          // local term id → index into that doc's terms
	doc    uint32
}

func (w *preparer) prepare(d Doc) preparedDoc {
	p := preparedDoc{id: d.ID, hash: d.Hash, server: d.Server, kind: d.Kind}
	fields := Fields(d)
	w.doc++
	for f := range NumFields {
		if w.ix.opts.Weights[f] == 0 {
			continue
		}
		n := uint32(0)
		w.ix.an.tokens(fields[f], func(tok string) {
			id, ok := w.tok[tok]
			if !ok {
				id = w.local(tok)
				w.tok[tok] = id
			}
			if id < 0 {
				return
			}
			n++
			if w.stamp[id] != w.doc {
				w.stamp[id] = w.doc
				w.at[id] = int32(len(p.terms))
				p.terms = append(p.terms, termFreq{term: w.terms[id]})
			}
			if tf := &p.terms[w.at[id]].tf[f]; *tf < math.MaxUint8 {
				*tf++
			}
		})
		p.lens[f] = n
	}
	return p
}

// local returns tok's local term id, -1 for a dropped token.
func (w *preparer) local(tok string) int32 {
	t := w.ix.an.term(tok)
	if t == "" {
		return -1
	}
	if id, ok := w.termID[t]; ok {
		return id
	}
	id := int32(len(w.terms))
	w.termID[t] = id
	w.terms = append(w.terms, t)
	w.stamp = append(w.stamp, 0)
	w.at = append(w.at, 0)
	return id
}

func (ix *Index) addLocked(p *preparedDoc) {
	slot := uint32(len(ix.docs))
	info := docInfo{id: p.id, hash: p.hash, lens: p.lens, terms: make([]uint32, len(p.terms))}
	for i, tf := range p.terms {
		t, ok := ix.terms[tf.term]
		if !ok {
			t = uint32(len(ix.post))
			// Clone: the term may point into the document's text.
			ix.terms[strings.Clone(tf.term)] = t
			ix.post = append(ix.post, postingList{})
			ix.df = append(ix.df, 0)
		}
		pl := &ix.post[t]
		pl.docs = append(pl.docs, slot)
		pl.w = append(pl.w, 0)
		pl.tf = append(pl.tf, tf.tf)
		ix.df[t]++
		info.terms[i] = t
	}
	for f := range NumFields {
		ix.lenSum[f] += uint64(p.lens[f])
	}
	ix.docs = append(ix.docs, info)
	ix.meta = append(ix.meta, slotMeta{server: ix.servers.id(p.server), kind: uint16(ix.kinds.id(p.kind)), alive: true})
	ix.byID[p.id] = slot
	ix.live++
}

// deleteLocked tombstones a document; its postings stay until compaction
// and searches skip them.
func (ix *Index) deleteLocked(id string) {
	slot, ok := ix.byID[id]
	if !ok {
		return
	}
	d := &ix.docs[slot]
	for _, t := range d.terms {
		ix.df[t]--
	}
	for f := range NumFields {
		ix.lenSum[f] -= uint64(d.lens[f])
	}
	d.terms = nil
	ix.meta[slot].alive = false
	delete(ix.byID, id)
	ix.live--
}

// compactLocked drops tombstoned documents and their postings and renumbers
// the rest, keeping postings sorted by slot.
func (ix *Index) compactLocked() {
	remap := make([]uint32, len(ix.docs))
	docs := make([]docInfo, 0, ix.live)
	meta := make([]slotMeta, 0, ix.live)
	for i, d := range ix.docs {
		if !ix.meta[i].alive {
			remap[i] = math.MaxUint32
			continue
		}
		remap[i] = uint32(len(docs))
		ix.byID[d.id] = uint32(len(docs))
		docs = append(docs, d)
		meta = append(meta, ix.meta[i])
	}
	ix.docs, ix.meta = docs, meta
	for t := range ix.post {
		pl := &ix.post[t]
		n := 0
		for i, d := range pl.docs {
			if r := remap[d]; r != math.MaxUint32 {
				pl.docs[n], pl.w[n], pl.tf[n] = r, pl.w[i], pl.tf[i]
				n++
			}
		}
		pl.docs, pl.w, pl.tf = slices.Clip(pl.docs[:n]), slices.Clip(pl.w[:n]), slices.Clip(pl.tf[:n])
	}
}

// reweightLocked recomputes idf and every live posting's saturated weight;
// it is linear in the number of postings.
func (ix *Index) reweightLocked() {
	n := float64(ix.live)
	var avg [NumFields]float64
	for f := range NumFields {
		avg[f] = 1
		if ix.live > 0 && ix.lenSum[f] > 0 {
			avg[f] = float64(ix.lenSum[f]) / n
		}
	}
	ix.idf = slices.Grow(ix.idf[:0], len(ix.df))[:len(ix.df)]
	for t, df := range ix.df {
		ix.idf[t] = float32(math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5)))
	}
	k1, b := ix.opts.K1, ix.opts.B
	// norm[f] per slot would cost memory; fields are few, so compute the
	// per-document normalisers on the fly from a per-slot cache.
	norms := make([][NumFields]float64, len(ix.docs))
	for i := range ix.docs {
		if !ix.meta[i].alive {
			continue
		}
		for f := range NumFields {
			if w := ix.opts.Weights[f]; w > 0 {
				norms[i][f] = w / (1 - b + b*float64(ix.docs[i].lens[f])/avg[f])
			}
		}
	}
	for t := range ix.post {
		pl := &ix.post[t]
		for i, d := range pl.docs {
			if !ix.meta[d].alive {
				pl.w[i] = 0
				continue
			}
			var tf float64
			for f, c := range pl.tf[i] {
				if c != 0 {
					tf += float64(c) * norms[d][f]
				}
			}
			pl.w[i] = float32(tf / (k1 + tf))
		}
	}
	ix.dirty = false
}
