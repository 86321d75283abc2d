package detect_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cexec/cexec/internal/testutil/piitest"
	"github.com/cexec/cexec/plugins/guard-pii/internal/detect"
)

// TestMixedCorpus scores detection on 1 MiB of generated mixed text whose
// PII values are known (piitest.MixedLabelled): everything else in it —
// UUIDs, hashes, timestamps, prices, versions, SKUs, order numbers, code —
// is meant to stay untouched, so every extra span is a false positive on
// text shaped like real tool output. Unlike the hand-written labelled set,
// the values here are not chosen one by one, so a floor of 0.99 per type
// holds the detectors to near-exactness on routine formats.
func TestMixedCorpus(t *testing.T) {
	text, planted := piitest.MixedLabelled(1<<20, 1)
	d := mustNew(t, detect.Options{})
	spans, err := d.Detect(context.Background(), text, nil)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		start, end int
		typ        string
	}
	want := map[key]bool{}
	total := map[string]int{}
	for _, p := range planted {
		if p.Type == detect.Person {
			continue // needs an NER endpoint
		}
		want[key{p.Start, p.End, p.Type}] = true
		total[p.Type]++
	}
	tp, fp := map[string]int{}, map[string]int{}
	var extra []string
	for _, s := range spans {
		if want[key{s.Start, s.End, s.Type}] {
			tp[s.Type]++
			continue
		}
		fp[s.Type]++
		if len(extra) < 10 {
			extra = append(extra, fmt.Sprintf("%s %q", s.Type, text[s.Start:s.End]))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-12s %6s %5s %5s %9s %7s\n", "type", "tp", "fp", "fn", "precision", "recall")
	var low []string
	for _, typ := range detect.DefaultTypes {
		p, r := ratio(tp[typ], tp[typ]+fp[typ]), ratio(tp[typ], total[typ])
		fmt.Fprintf(&b, "%-12s %6d %5d %5d %9.4f %7.4f\n", typ, tp[typ], fp[typ], total[typ]-tp[typ], p, r)
		if total[typ] == 0 || p < 0.99 || r < 0.99 {
			low = append(low, typ)
		}
	}
	t.Logf("%d bytes, %d planted values%s", len(text), len(want), b.String())
	if len(extra) > 0 {
		t.Logf("first unexpected spans: %s", strings.Join(extra, "; "))
	}
	if len(low) > 0 {
		t.Errorf("below 0.99 precision or recall (or nothing planted): %v", low)
	}
}
