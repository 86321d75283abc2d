package ranker

import (
	"slices"
)

// scratch is per-search working memory, pooled so a search allocates
// next to nothing.
type scratch struct {
	acc     []float32
	touched []uint32
	best    []float32 // per server, for ServerBoost
	toks    []string
	query   []queryTerm
	qterms  []weightedTerm
	heap    hitHeap
}

type weightedTerm struct {
	term   uint32
	weight float32
}

// Search returns up to limit hits for query, best first (ties by id).
// Documents that match no query term are never returned.
func (ix *Index) Search(query string, limit int, f Filter) []Hit {
	if limit <= 0 {
		return nil
	}
	s, _ := ix.scratch.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	defer ix.scratch.Put(s)
	s.toks = ix.an.Analyze(s.toks[:0], query)
	s.query = ix.ex.expand(s.query[:0], query, s.toks, float32(ix.opts.ExpansionWeight))

	ix.rlockWeighted()
	defer ix.mu.RUnlock()

	acc, sparse, ok := ix.accumulate(s)
	if !ok {
		return nil
	}
	ix.collect(s, ix.candidates(f, acc, sparse, s.touched), limit)
	if sparse {
		for _, d := range s.touched {
			acc[d] = 0
		}
	} else {
		clear(acc)
	}
	clear(s.best)

	slices.SortFunc(s.heap, func(a, b scored) int {
		if ix.better(a, b) {
			return -1
		}
		return 1
	})
	hits := make([]Hit, len(s.heap))
	for i, h := range s.heap {
		hits[i] = Hit{ID: ix.docs[h.slot].id, Score: float64(h.score)}
	}
	return hits
}

// rlockWeighted read-locks the index with its BM25 weights up to date: a
// change since the last search leaves them to be recomputed first.
func (ix *Index) rlockWeighted() {
	ix.mu.RLock()
	for ix.dirty {
		ix.mu.RUnlock()
		ix.mu.Lock()
		if ix.dirty {
			ix.reweightLocked()
		}
		ix.mu.Unlock()
		ix.mu.RLock()
	}
}

// accumulate adds each indexed query term's weighted postings into the
// scratch accumulator it returns. sparse says the touched slots were
// recorded in s.touched rather than left to a scan of the accumulator; ok
// is false when no query term is indexed.
func (ix *Index) accumulate(s *scratch) (acc []float32, sparse, ok bool) {
	s.qterms = s.qterms[:0]
	total := 0
	for _, q := range s.query {
		if t, ok := ix.terms[q.term]; ok && ix.df[t] > 0 {
			s.qterms = append(s.qterms, weightedTerm{t, q.weight})
			total += len(ix.post[t].docs)
		}
	}
	if len(s.qterms) == 0 {
		return nil, false, false
	}
	n := len(ix.docs)
	if cap(s.acc) < n {
		s.acc = make([]float32, n)
	}
	acc = s.acc[:n]
	// With few postings, remember which slots were touched; with many, a
	// linear scan of the accumulator is cheaper than a long random list.
	sparse = total < n/8
	touched := s.touched[:0]
	for _, q := range s.qterms {
		idf := ix.idf[q.term] * q.weight
		pl := &ix.post[q.term]
		w := pl.w[:len(pl.docs)]
		if sparse {
			for i, d := range pl.docs {
				if acc[d] == 0 && w[i] != 0 {
					touched = append(touched, d)
				}
				acc[d] += idf * w[i]
			}
			continue
		}
		for i, d := range pl.docs {
			acc[d] += idf * w[i]
		}
	}
	s.touched = touched
	return acc, sparse, true
}

// collect keeps the best limit candidates in s.heap, each with its share
// of the best score among its server's candidates.
func (ix *Index) collect(s *scratch, c candidates, limit int) {
	boost := float32(ix.opts.ServerBoost)
	if boost > 0 {
		ns := len(ix.servers.names)
		if cap(s.best) < ns {
			s.best = make([]float32, ns)
		}
		s.best = s.best[:ns]
		c.each(func(slot uint32, score float32) {
			sv := ix.meta[slot].server
			s.best[sv] = max(s.best[sv], score)
		})
	}
	s.heap = s.heap[:0]
	c.each(func(slot uint32, score float32) {
		if boost > 0 {
			score += boost * s.best[ix.meta[slot].server]
		}
		s.heap.offer(ix, scored{slot: slot, score: score}, limit)
	})
}

// candidates iterates the live, unfiltered slots with a positive score.
type candidates struct {
	ix      *Index
	acc     []float32
	sparse  bool
	touched []uint32
	servers map[uint32]bool
	kinds   map[uint32]bool
}

func (ix *Index) candidates(f Filter, acc []float32, sparse bool, touched []uint32) candidates {
	c := candidates{ix: ix, acc: acc, sparse: sparse, touched: touched}
	c.servers = filterSet(f.Servers, &ix.servers)
	c.kinds = filterSet(f.Kinds, &ix.kinds)
	return c
}

func (c *candidates) each(fn func(slot uint32, score float32)) {
	visit := func(slot uint32, v float32) {
		m := c.ix.meta[slot]
		if !m.alive || (c.servers != nil && !c.servers[m.server]) || (c.kinds != nil && !c.kinds[uint32(m.kind)]) {
			return
		}
		fn(slot, v)
	}
	if c.sparse {
		for _, slot := range c.touched {
			if v := c.acc[slot]; v > 0 {
				visit(slot, v)
			}
		}
		return
	}
	for slot, v := range c.acc {
		if v > 0 {
			visit(uint32(slot), v)
		}
	}
}

// filterSet turns names into a lookup by interned id; nil means no
// restriction. Unknown names match nothing.
func filterSet(names []string, n *intern) map[uint32]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[uint32]bool, len(names))
	for _, name := range names {
		if id, ok := n.ids[name]; ok {
			m[id] = true
		}
	}
	return m
}

type scored struct {
	slot  uint32
	score float32
}

// better orders by score, then by id so equal scores rank deterministically.
func (ix *Index) better(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return ix.docs[a.slot].id < ix.docs[b.slot].id
}

// hitHeap is a min-heap (worst hit on top) bounded by the search limit.
type hitHeap []scored

func (h *hitHeap) offer(ix *Index, x scored, limit int) {
	if len(*h) < limit {
		*h = append(*h, x)
		h.up(ix, len(*h)-1)
		return
	}
	if !ix.better(x, (*h)[0]) {
		return
	}
	(*h)[0] = x
	h.down(ix, 0)
}

func (h hitHeap) up(ix *Index, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !ix.better(h[p], h[i]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (h hitHeap) down(ix *Index, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		w := l
		if r := l + 1; r < len(h) && ix.better(h[l], h[r]) {
			w = r
		}
		if !ix.better(h[i], h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}
