package searcheval

import (
	"math"
	"testing"
)

func set(ids ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNDCG(t *testing.T) {
	tests := []struct {
		name     string
		ranked   []string
		relevant map[string]bool
		k        int
		want     float64
	}{
		{"perfect", []string{"a", "b", "x"}, set("a", "b"), 10, 1},
		// DCG = 1/log2(3) = 0.63093; IDCG = 1 + 1/log2(3) = 1.63093.
		{"one of two at rank 2", []string{"x", "a"}, set("a", "b"), 10, 0.6309297535714575 / 1.6309297535714575},
		// DCG = 1/log2(4) = 0.5; IDCG (one relevant) = 1.
		{"single relevant at rank 3", []string{"x", "y", "a"}, set("a"), 10, 0.5},
		{"beyond k", []string{"x", "y", "a"}, set("a"), 2, 0},
		{"nothing retrieved", nil, set("a"), 10, 0},
		{"no relevant", []string{"a"}, set(), 10, 0},
		// 12 relevant, all retrieved: IDCG is capped at k terms, so 1.
		{"more relevant than k", []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}, set("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"), 10, 1},
	}
	for _, tt := range tests {
		if got := NDCG(tt.ranked, tt.relevant, tt.k); !near(got, tt.want) {
			t.Errorf("%s: NDCG = %.6f, want %.6f", tt.name, got, tt.want)
		}
	}
}

func TestRecallAndRR(t *testing.T) {
	ranked := []string{"x", "a", "y", "z", "w", "b", "c"}
	rel := set("a", "b", "q")
	if got := Recall(ranked, rel, 5); !near(got, 1.0/3) {
		t.Errorf("Recall@5 = %v, want 1/3", got)
	}
	if got := Recall(ranked, rel, 10); !near(got, 2.0/3) {
		t.Errorf("Recall@10 = %v, want 2/3", got)
	}
	if got := Recall([]string{"a", "a"}, set("a", "b"), 5); !near(got, 0.5) {
		t.Errorf("duplicate hits counted twice: %v", got)
	}
	if got := ReciprocalRank(ranked, rel); !near(got, 0.5) {
		t.Errorf("RR = %v, want 1/2", got)
	}
	if got := ReciprocalRank(ranked, set("none")); got != 0 {
		t.Errorf("RR without a relevant hit = %v", got)
	}
}

func TestAccumulatorMeans(t *testing.T) {
	var a Accumulator
	a.Add([]string{"a"}, []string{"a"})      // all 1
	a.Add([]string{"x", "a"}, []string{"a"}) // ndcg 1/log2(3), recalls 1, rr 1/2
	a.Add([]string{"a"}, nil)                // ignored: no relevant tools
	m := a.Mean()
	if a.Queries() != 2 {
		t.Fatalf("queries = %d", a.Queries())
	}
	want := Metrics{NDCG10: (1 + 1/math.Log2(3)) / 2, Recall5: 1, Recall10: 1, MRR: 0.75}
	if !near(m.NDCG10, want.NDCG10) || !near(m.Recall5, 1) || !near(m.Recall10, 1) || !near(m.MRR, 0.75) {
		t.Fatalf("mean = %+v, want %+v", m, want)
	}
	var empty Accumulator
	if empty.Mean() != (Metrics{}) {
		t.Fatal("empty mean not zero")
	}
}
