package embeddings

import (
	"testing"
	"time"

	"github.com/cexec/cexec/plugins/selector-embeddings/internal/ranker"
)

type rankerHit struct {
	id    string
	score float64
}

func toRanker(hs []rankerHit) []ranker.Hit {
	out := make([]ranker.Hit, len(hs))
	for i, h := range hs {
		out[i] = ranker.Hit{ID: h.id, Score: h.score}
	}
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// eventually waits for cond, which a background goroutine makes true; it
// fails the test if that never happens.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never became true")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
