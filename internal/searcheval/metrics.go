package searcheval

import "math"

// Metrics are mean retrieval scores over a query set, with binary relevance
// (a tool is relevant to a query or not). For one query with relevant set R
// and ranked hits h_1, h_2, … (rel_i = 1 when h_i ∈ R, else 0):
//
//	DCG@k    = Σ_{i=1..k} rel_i / log2(i+1)
//	IDCG@k   = Σ_{i=1..min(k,|R|)} 1 / log2(i+1)     (all relevant tools first)
//	NDCG@k   = DCG@k / IDCG@k
//	Recall@k = |R ∩ {h_1..h_k}| / |R|
//	RR       = 1 / (rank of the first relevant hit), 0 if none is retrieved
//	           within the search depth (Depth hits)
//
// Each figure is the mean over the queries that have at least one relevant
// tool; MRR is the mean RR.
type Metrics struct {
	NDCG10   float64 `json:"ndcg10"`
	Recall5  float64 `json:"recall5"`
	Recall10 float64 `json:"recall10"`
	MRR      float64 `json:"mrr"`
}

// Depth is how many hits an evaluation asks for per query; reciprocal rank
// looks this deep.
const Depth = 100

// NDCG returns NDCG@k of ranked against the relevant set.
func NDCG(ranked []string, relevant map[string]bool, k int) float64 {
	if len(relevant) == 0 || k <= 0 {
		return 0
	}
	var dcg, idcg float64
	for i := 0; i < k && i < len(ranked); i++ {
		if relevant[ranked[i]] {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := 0; i < k && i < len(relevant); i++ {
		idcg += 1 / math.Log2(float64(i+2))
	}
	return dcg / idcg
}

// Recall returns Recall@k of ranked against the relevant set.
func Recall(ranked []string, relevant map[string]bool, k int) float64 {
	if len(relevant) == 0 {
		return 0
	}
	found := 0
	seen := map[string]bool{}
	for i := 0; i < k && i < len(ranked); i++ {
		if relevant[ranked[i]] && !seen[ranked[i]] {
			seen[ranked[i]] = true
			found++
		}
	}
	return float64(found) / float64(len(relevant))
}

// ReciprocalRank returns 1/rank of the first relevant id in ranked, or 0.
func ReciprocalRank(ranked []string, relevant map[string]bool) float64 {
	for i, id := range ranked {
		if relevant[id] {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// Accumulator averages per-query metrics.
type Accumulator struct {
	sum Metrics
	n   int
}

// Add scores one query's ranking; queries without relevant ids are ignored.
func (a *Accumulator) Add(ranked []string, relevant []string) {
	if len(relevant) == 0 {
		return
	}
	rel := make(map[string]bool, len(relevant))
	for _, id := range relevant {
		rel[id] = true
	}
	a.sum.NDCG10 += NDCG(ranked, rel, 10)
	a.sum.Recall5 += Recall(ranked, rel, 5)
	a.sum.Recall10 += Recall(ranked, rel, 10)
	a.sum.MRR += ReciprocalRank(ranked, rel)
	a.n++
}

// Queries returns how many queries were scored.
func (a *Accumulator) Queries() int { return a.n }

// Mean returns the mean metrics (zero when nothing was scored).
func (a *Accumulator) Mean() Metrics {
	if a.n == 0 {
		return Metrics{}
	}
	n := float64(a.n)
	return Metrics{NDCG10: a.sum.NDCG10 / n, Recall5: a.sum.Recall5 / n, Recall10: a.sum.Recall10 / n, MRR: a.sum.MRR / n}
}
