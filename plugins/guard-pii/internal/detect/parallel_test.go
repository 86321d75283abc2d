package detect

import (
	"context"
	"slices"
	"testing"

	"github.com/cexec/cexec/internal/testutil/piitest"
)

// TestParallelSameAsSequential runs the detector groups on separate
// goroutines and one after the other over the same text: the answers must
// be identical (and, under -race, free of data races).
func TestParallelSameAsSequential(t *testing.T) {
	text := piitest.Mixed(256<<10, 9)
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	par, err := d.Detect(context.Background(), text, nil)
	if err != nil {
		t.Fatal(err)
	}
	saved := parallelMin
	parallelMin = len(text) + 1
	defer func() { parallelMin = saved }()
	seq, err := d.Detect(context.Background(), text, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(par) < 100 || !slices.Equal(par, seq) {
		t.Errorf("parallel found %d spans, sequential %d; they must be equal and many", len(par), len(seq))
	}
}
